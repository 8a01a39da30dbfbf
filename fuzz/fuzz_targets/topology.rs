//! slurm.conf (the ranking plugin) and topology.conf (node ranks), as nodes read them on
//! Slurm 26.05: input is slurm.conf, a NUL, topology.conf, a NUL, a host list.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tfcluster::core::hostlist::expand;
use tfcluster::core::topology::{NodeRanks, SlurmConf};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = text.splitn(3, '\0');
    let (conf, topo, hosts) = (
        parts.next().unwrap_or(""),
        parts.next(),
        parts.next().unwrap_or(""),
    );
    let conf = SlurmConf::parse(conf);
    let plugin = conf.ranking_plugin().unwrap_or("topology/tree").to_string();
    let Ok(ranks) = NodeRanks::read(&plugin, topo) else {
        return;
    };
    let Ok(hosts) = expand(hosts) else { return };
    if let Ok(order) = ranks.order(&hosts) {
        // A permutation of the step's nodes.
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(sorted, (0..hosts.len()).collect::<Vec<_>>());
    }
});
