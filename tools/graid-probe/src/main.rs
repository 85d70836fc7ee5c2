//! graid-probe: selftest helper that sends malformed, hostile and edge-case ioctls to
//! `/dev/graid-control` and checks each gets the expected answer and nothing worse. Prints one
//! TAP-like line per case and exits non-zero if any case misbehaved.
//!
//! ```text
//! graid-probe ioctls [CONTROL]            malformed ioctls and pointers, unprivileged opens
//! graid-probe create SMALL MEMBER...      CREATE/STOP/DETAIL validation on real devices
//! graid-probe fail-sweep [--every K:F] assemble|create
//!                                          the call with each (or every K-th) of its allocations failing
//! graid-probe member INDEX fail|remove DEV MEMBER as sent, printing the module's answer
//! graid-probe helper [DEVICE]              /dev/graid-helper: opens, ATTACH, the area's mappings
//! graid-probe hostile MODE                 a helper that breaks the protocol or lies (hostile.rs)
//! graid-probe forge-ppl UUID HEAD_DEV ...   a log entry header forged into data (forge.rs)
//! graid-probe mark-reshape DEV...          an interrupted reshape in a stopped array's superblocks
//! ```

mod create;
mod fault;
mod forge;
mod helper;
mod hostile;
mod ioctls;
mod mark_reshape;
mod member;
mod sys;

use std::process::ExitCode;

const CONTROL: &str = "/dev/graid-control";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("ioctls") => ioctls::run(args.get(1).map_or(CONTROL, String::as_str)),
        Some("create") if args.len() >= 4 => create::run(CONTROL, &args[1], &args[2..]),
        Some("fail-sweep") => fault::run(CONTROL, &args[1..]),
        Some("member") => member::run(CONTROL, &args[1..]),
        Some("helper") => helper::run(args.get(1).map_or("/dev/graid-helper", String::as_str)),
        Some("hostile") if args.len() == 2 => hostile::run(&args[1]),
        Some("forge-ppl") => forge::run(&args[1..]),
        Some("mark-reshape") => mark_reshape::run(&args[1..]),
        _ => {
            eprintln!(
                "usage: graid-probe ioctls [CONTROL] | graid-probe create SMALL MEMBER MEMBER... | \
                 graid-probe fail-sweep assemble|create ... | graid-probe member INDEX fail|remove DEV | \
                 graid-probe helper [DEVICE] | graid-probe hostile MODE | \
                 graid-probe forge-ppl UUID HEAD_DEV MEMBERS START SECTORS MEMBER | \
                 graid-probe mark-reshape DEV..."
            );
            ExitCode::from(2)
        }
    }
}
