#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| clawbot_router::fuzzing::agent_service_body(data));
