#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| clawbot_router::fuzzing::browser_proxy_params(data));
