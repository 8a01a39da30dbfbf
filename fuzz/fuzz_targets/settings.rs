//! plugstack.conf words and the job's `KEY=VALUE` overrides.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tfcluster::core::{Settings, Spec};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (admin, job) = text.split_once('\n').unwrap_or((text, ""));
    let words: Vec<&str> = admin.split_whitespace().collect();
    let Ok(settings) = Settings::from_plugstack(&words) else {
        return;
    };
    let _ = settings.ports();
    if let Ok(spec) = Spec::parse(Some(job)) {
        let _ = settings.with_overrides(&spec.overrides);
    }
});
