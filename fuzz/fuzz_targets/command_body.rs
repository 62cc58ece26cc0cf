//! The command handler's body parsing (`POST` and `PATCH /commands`) on arbitrary bytes: no panic,
//! every refusal a 4xx, and every accepted command has valid keys and a version the rules allow.
//!
//! Input: the first byte chooses POST or PATCH, the rest is the body.
#![no_main]

use cqrs_command_handler::input::parse_command;
use cqrs_keys::{validate_partition_key, validate_sort_key};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, body)) = data.split_first() else {
        return;
    };
    let for_patch = mode & 1 == 1;
    let Ok(body) = std::str::from_utf8(body) else {
        return;
    };
    match parse_command(body, for_patch) {
        Ok(input) => {
            assert!(validate_partition_key(&input.pk).is_ok());
            assert!(validate_sort_key(&input.sk).is_ok());
            assert!(input.version >= -1);
            assert!(!(for_patch && input.version == 0));
            assert!(input.ttl.value().is_none_or(|t| t > 0));
        }
        Err(error) => {
            let status = error.status();
            assert!((400..500).contains(&status), "{status}: {error}");
            // The problem document renders.
            let _ = error.problem("fuzz");
        }
    }
});
