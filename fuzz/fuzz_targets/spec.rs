//! `--tf-cluster=SPEC` as srun receives it: parse, then resolve against step sizes. A spec that
//! parses must resolve to contiguous role slices covering exactly the step, or fail cleanly.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tfcluster::core::Spec;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = Spec::check_typed(Some(text));
    let _ = Spec::check_program(text);
    let arg = Spec::slurm_arg(Some(text));
    let Ok(spec) = Spec::parse(arg) else { return };
    let _ = spec.roles_text();
    for tasks in [1, 2, 3, 7, 64, 4096] {
        let Ok(table) = spec.resolve(tasks) else {
            continue;
        };
        let mut next = 0;
        for slice in &table.slices {
            assert_eq!(slice.start, next, "slices are contiguous");
            assert!(slice.count > 0, "no empty slice");
            next += slice.count;
        }
        assert_eq!(next, tasks, "the roles cover the step");
        assert_eq!(table.of_rank(tasks), None);
        assert!(table.of_rank(tasks - 1).is_some());
    }
});
