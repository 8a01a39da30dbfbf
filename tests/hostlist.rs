//! Slurm's hostlist grammar, one case per line. H1-H5 are TensorFlow's own test cases
//! (slurm_cluster_resolver_test.py); X-cases are where TensorFlow's parser is wrong and Slurm's
//! behaviour is the contract.

#![allow(clippy::type_complexity)] // tables of cases

use tfcluster::core::hostlist::expand;

#[rustfmt::skip]
const EXPANSIONS: &[(&str, &[&str])] = &[
    // TensorFlow's test_expand_hostlist
    ("n1",                          &["n1"]),                                              // H1
    ("n[1,3]",                      &["n1", "n3"]),                                        // H2
    ("n[1-3]",                      &["n1", "n2", "n3"]),                                  // H3
    ("n[1-2],m5,o[3-4,6,7-9]",      &["n1", "n2", "m5", "o3", "o4", "o6", "o7", "o8", "o9"]), // H4
    ("n[0001-0003],m5,o[009-011]",  &["n0001", "n0002", "n0003", "m5", "o009", "o010", "o011"]), // H5
    // Padding is the width of the low bound only
    ("n[9-11]",                     &["n9", "n10", "n11"]),                                // X1
    ("n[08-10]",                    &["n08", "n09", "n10"]),                               // X2
    ("n[001-5]",                    &["n001", "n002", "n003", "n004", "n005"]),
    ("a-b.c[1-2]",                  &["a-b.c1", "a-b.c2"]),                                // X3
    ("n[1-3,2-4]",                  &["n1", "n2", "n3", "n2", "n3", "n4"]),                // X4: order and duplicates kept
    // What TensorFlow rejects and Slurm accepts
    ("node[1-2]-ib",                &["node1-ib", "node2-ib"]),                            // X5: suffix
    ("rack[1-2]-n[1-2]",            &["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),    // X6: two groups
    ("a[1-2]b[3-4]c[5-6]",          &["a1b3c5", "a1b3c6", "a2b3c5", "a2b3c6",
                                      "a1b4c5", "a1b4c6", "a2b4c5", "a2b4c6"]),           // Slurm's 3-group order
    ("n1,m[2-3] x4",                &["n1", "m2", "m3", "x4"]),                            // mixed separators
    ("n1\tn2\nn3",                  &["n1", "n2", "n3"]),
    ("n1,,n2",                      &["n1", "n2"]),                                        // X8: runs of separators
    ("",                            &[]),                                                  // X9
    (" , ",                         &[]),
    // What Slurm itself emits, seen on the test cluster
    ("n[011-012,9-10]",             &["n011", "n012", "n9", "n10"]),
    ("t02n13,t02n41,t02n43",        &["t02n13", "t02n41", "t02n43"]),
    ("gpu-node[0001-0003]",         &["gpu-node0001", "gpu-node0002", "gpu-node0003"]),
    ("c1001a-s[11,17]",             &["c1001a-s11", "c1001a-s17"]),
    ("compute+b24_[1-2]",           &["compute+b24_1", "compute+b24_2"]),
    ("b04-[09-10]",                 &["b04-09", "b04-10"]),
];

#[rustfmt::skip]
const ERRORS: &[(&str, &str)] = &[
    ("n[3-1]",       "hostlist 'n[3-1]': invalid range '3-1': the low end is above the high end"),  // X7
    ("n[1-2",        "hostlist 'n[1-2': '[' without a matching ']'"),
    ("n1-2]",        "hostlist 'n1-2]': ']' without a matching '['"),
    ("n[1[2]]",      "hostlist 'n[1[2]]': nested '[' inside a bracket group"),
    ("n[1x2]",       "hostlist 'n[1x2]': '1x2' is a multi-dimensional box; only 1-D hostlists are supported"),
    ("n[]",          "hostlist 'n[]': '' is not a number or a LO-HI range"),
    ("n[a-b]",       "hostlist 'n[a-b]': 'a-b' is not a number or a LO-HI range"),
    ("n[-1]",        "hostlist 'n[-1]': '-1' is not a number or a LO-HI range"),
    ("n[1--2]",      "hostlist 'n[1--2]': '1--2' is not a number or a LO-HI range"),
    ("n[0-65536]",   "hostlist 'n[0-65536]': range '0-65536' has more than 65536 values"),
    ("n[99999999999999999999]", "hostlist 'n[99999999999999999999]': '99999999999999999999' has a number that is too large"),
    ("a[1-300]b[1-300]", "hostlist 'a[1-300]b[1-300]': expands to more than 65536 hosts"),
];

#[test]
fn expands_like_slurm() {
    for (list, want) in EXPANSIONS {
        let got = expand(list).unwrap_or_else(|e| panic!("{list:?}: {e}"));
        assert_eq!(got, *want, "hostlist {list:?}");
    }
}

#[test]
fn rejects_what_slurm_rejects() {
    for (list, message) in ERRORS {
        let err = expand(list).expect_err(list);
        assert_eq!(err.to_string(), *message, "hostlist {list:?}");
    }
}

#[test]
fn the_largest_range_slurm_allows_expands() {
    assert_eq!(expand("n[1-65536]").unwrap().len(), 65536);
}
