//! `SLURM_STEP_RESV_PORTS` (`12000-12003,12010`), and the ports a step's slots get from it.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tfcluster::core::ports::{parse_port_list, PortPolicy, StepPorts};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(ports) = parse_port_list(text) {
        assert!(ports.iter().all(|&p| p >= 1));
    }
    let policy = PortPolicy::Range {
        lo: 20000,
        hi: 32767,
        block: 64,
    };
    for max_local in [1, 4, 64] {
        if let Ok(step) = StepPorts::plan(&policy, Some(text), 7, 3, max_local, "n1") {
            let ports: Vec<u32> = (0..max_local).map(|s| step.of_slot(s)).collect();
            assert!(ports.iter().all(|&p| (1..=65535).contains(&p)), "{ports:?}");
            let mut unique = ports.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(
                unique.len(),
                ports.len(),
                "two slots share a port: {ports:?}"
            );
        }
    }
});
