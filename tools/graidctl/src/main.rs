//! graidctl: manage graid arrays (the mdadm of graid).

mod array_ref;
mod assemble;
mod config;
mod content_end;
mod control;
mod create;
mod errno;
mod error;
mod examine;
mod export;
mod grow;
mod grow_members;
mod helper;
mod homehost;
mod kernel_module;
mod manage;
mod member;
mod metrics;
mod monitor;
mod nvmet;
mod output;
mod replace;
mod sbio;
mod scrub;
mod show;
mod signature;
mod size;
mod speed;
mod stop;
mod uuid;
mod version;
mod wait;
mod wait_clean;

use clap::{Parser, Subcommand};
use control::Control;
use error::CtlError;
use member::RealSystem;
use std::process::ExitCode;

const EXIT_CODES_HELP: &str = "\
Exit status:
  0  success
  1  failure (the message names the array or member and the reason)
  2  usage error: bad option or value (chunk size, name, member count, UUID, ARRAY);
     nothing was done
  3  the raid_gpu module is not loaded
  4  the loaded module speaks another ABI version than this graidctl, or lacks an
     ioctl it needs
  5  permission denied (graid's control device and member devices need root)
  6  monitor --oneshot: an array is degraded (none has failed)
  7  monitor --oneshot: an array has failed
  8  monitor --oneshot: the raid_gpu module is not installed for the running kernel

ARRAY is /dev/graidN, graidN, N, /dev/graid/NAME, NAME, or a link to /dev/graidN.";

#[derive(Parser, Debug)]
#[command(
    name = "graidctl",
    version,
    about = "Manage graid GPU-accelerated software RAID arrays"
)]
#[command(after_help = EXIT_CODES_HELP)]
struct Cli {
    /// Print machine-readable JSON instead of human-readable text.
    #[arg(long, global = true)]
    json: bool,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print graidctl's and the loaded raid_gpu module's versions and ABI versions.
    Version,
    /// Show the parity helper (graid-helper) the module offloads RAID 5/6 parity to, and the
    /// offload counters: jobs, bytes, latency, jobs computed in the kernel by reason.
    Helper,
    /// Create an array and write a new superblock to each member.
    Create(create::CreateArgs),
    /// Start an existing array from its members.
    #[command(
        override_usage = "graidctl assemble [--run] [ARRAY] MEMBER...\n       \
                                graidctl assemble --scan [--run]"
    )]
    Assemble(assemble::AssembleArgs),
    /// Stop an array: its block device goes away and its members are released.
    Stop {
        /// The array (see ARRAY below).
        array: String,
        /// Stop even if the array is open (the module refuses if I/O would be lost).
        #[arg(short, long)]
        force: bool,
    },
    /// List the running arrays.
    List,
    /// Export a running array over NVMe-oF through the kernel's target (nvmet): to the hosts
    /// named by host NQN, over TCP or RDMA. Kept in /etc/graid/exports.conf and exported again
    /// whenever the array starts (--restore).
    Export(export::ExportArgs),
    /// Take an array's NVMe-oF export down and forget it.
    Unexport {
        /// The array (see ARRAY below), or the name exports.conf gives one not running.
        array: String,
    },
    /// Describe a running array and its members; with --scan, print an ARRAY line for each
    /// running array, for /etc/graid/graid.conf.
    Detail {
        /// The array (see ARRAY below).
        #[arg(required_unless_present = "scan", conflicts_with = "scan")]
        array: Option<String>,
        /// Print GRAID_NAME=, GRAID_UUID= and GRAID_LEVEL= lines for udev's IMPORT{program}.
        #[arg(long)]
        export: bool,
        /// Print graid.conf ARRAY lines of the running arrays (mdadm's --detail --scan).
        #[arg(short, long, conflicts_with = "export")]
        scan: bool,
    },
    /// Stop using members of a running array, as if they had failed (refused where one holds
    /// the last copy of some data); recorded in the other members' superblocks.
    Fail(manage::MemberArgs),
    /// Release failed members from a running array (their roles are then missing).
    Remove(manage::MemberArgs),
    /// Add devices in the place of removed members of a running array: each gets a new
    /// superblock and is rebuilt in the background (RAID 1, 10, 5, 6).
    Add(manage::AddArgs),
    /// Put former members back in their own roles (mdadm's --re-add): each device's superblock
    /// must name this array and a role that is missing now. Only what the write-intent bitmap
    /// marks as written while it was away is rebuilt (all of it on an array without a bitmap).
    ReAdd(manage::MemberArgs),
    /// Replace an active member by a new device while it keeps serving (mdadm's --replace
    /// --with): the device (a spare, or added as one) is copied from the member in the
    /// background and gets every write; once it holds everything it takes the member's place
    /// and the old device leaves the array. Redundancy never drops meanwhile.
    Replace(replace::ReplaceArgs),
    /// Resize a running array (mdadm's --grow --size): into the room its members have, after
    /// every member was replaced by a larger device (the new room is resynced in the
    /// background: graidctl wait), or smaller, once the filesystem, LVM physical volume or
    /// partition table on it ends within the new size (shrink that first). Each member's data
    /// area takes --size; the array's capacity follows at once (resize2fs or xfs_growfs can use
    /// it mounted). Or change a raid1's copies (mdadm's --grow --raid-devices): more, each
    /// rebuilt onto a device given with --add, or fewer, once their members were failed and
    /// removed.
    Grow(grow::GrowArgs),
    /// Show or set a running array's rebuild speed limits: at least --min per second while
    /// the array serves other I/O (which keeps priority), at most --max while it is idle.
    SetSpeed(speed::SpeedArgs),
    /// Start a check of a running array in the background: compare every copy (RAID 1/10) or
    /// every stripe's parity (RAID 5/6) and count mismatches (detail shows them).
    Check(scrub::ScrubArgs),
    /// Start a repair: a check that also rewrites what differs (the other copies from the
    /// first, the parity from the data, as md does).
    Repair(scrub::ScrubArgs),
    /// Wait until a running array's rebuild ends, showing its progress (a bar on a terminal,
    /// a line per 10 % otherwise); fails if the rebuild cannot complete.
    Wait {
        /// The array (see ARRAY below).
        array: String,
    },
    /// Wait until every running array is marked clean (no write in flight, superblocks say
    /// clean), as at shutdown after the filesystems are unmounted; fails naming the arrays
    /// still dirty after the timeout.
    WaitClean {
        /// Seconds to wait at most.
        #[arg(long, default_value_t = 10)]
        timeout: u64,
    },
    /// Print the graid superblock of a member device (works without the module).
    Examine {
        /// Member block device (or image file).
        member: String,
        /// Print udev properties (KEY=value lines: ID_FS_TYPE=graid_member and the array's
        /// UUID and name) for udev's IMPORT{program}; nothing, and exit 0, when the device holds
        /// no graid superblock.
        #[arg(long, conflicts_with = "json")]
        export: bool,
    },
    /// Erase the graid superblock of a member that is not in a running array.
    ZeroSuperblock {
        /// Member block device (or image file).
        member: String,
        /// Zero the superblock block even if it holds no graid superblock.
        #[arg(short, long)]
        force: bool,
    },
    /// Watch the arrays and the parity helper and report every event (a member failed, a
    /// spare took over, a rebuild's progress, a check's mismatches, the helper attached or
    /// caught lying, raid_gpu not installed for the running kernel) to the log and a program,
    /// as mdadm --monitor does; --oneshot checks once.
    Monitor(monitor::MonitorArgs),
    /// Print the running arrays' and the parity helper's state and counters as Prometheus
    /// metrics (text format), for node_exporter's textfile collector or a scraper.
    Metrics {
        /// Write them to FILE instead (by a rename, so a collector never reads half of it),
        /// e.g. /var/lib/prometheus/node-exporter/graid.prom.
        #[arg(short, long, value_name = "FILE")]
        output: Option<std::path::PathBuf>,
    },
    /// Write the man pages and shell completions into DIR (used by packaging).
    #[command(hide = true)]
    GenerateDocs { dir: std::path::PathBuf },
}

fn run(cli: Cli) -> Result<String, CtlError> {
    let sys = RealSystem;
    let json = cli.json;
    match cli.command {
        Command::Version => version::run(json),
        Command::GenerateDocs { dir } => {
            graid_clidoc::write(<Cli as clap::CommandFactory>::command(), &dir).map_err(
                |source| CtlError::Io {
                    what: dir.display().to_string(),
                    source,
                },
            )?;
            Ok(String::new())
        }
        Command::Helper => helper::run(&Control::open_checked()?, json),
        Command::Examine {
            member,
            export: true,
        } => examine::export(&sys, &member),
        Command::Examine { member, .. } => examine::examine(&sys, &member, json),
        Command::ZeroSuperblock { member, force } => examine::zero(&member, force, json),
        // Everything checkable without the module is checked before opening it.
        Command::Create(mut args) => {
            if args.homehost.is_none() {
                args.homehost = Some(homehost::default_for_create(&homehost::load()?));
            }
            let req = create::prepare(&sys, &args)?;
            create::submit(&Control::open_checked()?, &sys, &args, req, json)
        }
        Command::Assemble(args) => {
            let prepared = assemble::prepare(&sys, &args)?;
            let _turn = assemble::take_turn(&args)?;
            let ctl = if args.incremental.is_some() {
                Control::open_loading()?
            } else {
                Control::open_checked()?
            };
            // Only the searching forms obey the host's identity: named members are the
            // admin's explicit choice.
            let policy = if assemble::scans(&args) {
                homehost::load()?
            } else {
                homehost::Policy::any_host()
            };
            assemble::submit(&ctl, &sys, &args, &prepared, &policy, json)
        }
        Command::Stop { array, force } => {
            let array = array_ref::parse(&array)?;
            stop::run(&Control::open_checked()?, &sys, &array, force, json)
        }
        Command::List => show::list(&Control::open_checked()?, &sys, json),
        Command::Export(args) => {
            export::precheck(&args)?;
            export::run(&Control::open_checked()?, &sys, &args, json)
        }
        Command::Unexport { array } => {
            export::unexport(&Control::open_checked()?, &sys, &array, json)
        }
        Command::Monitor(args) => monitor::run(&args, Control::open_checked, &sys),
        Command::Metrics { output } => {
            metrics::run(&Control::open_checked()?, &sys, output.as_deref())
        }
        Command::Fail(args) => manage::main(&args, manage::Action::Fail, &sys, json),
        Command::Remove(args) => manage::main(&args, manage::Action::Remove, &sys, json),
        Command::Add(args) => manage::add(&args, &sys, json),
        Command::ReAdd(args) => manage::main(&args, manage::Action::ReAdd, &sys, json),
        Command::Replace(args) => replace::main(&args, &sys, json),
        Command::Grow(args) => {
            let array = array_ref::parse(args.array())?;
            grow::run(&Control::open_checked()?, &sys, &array, &args, json)
        }
        Command::SetSpeed(args) => {
            let array = array_ref::parse(args.array())?;
            speed::run(&Control::open_checked()?, &sys, &array, &args, json)
        }
        Command::Check(args) => scrub::main(&args, scrub::Scrub::Check, &sys, json),
        Command::Repair(args) => scrub::main(&args, scrub::Scrub::Repair, &sys, json),
        Command::Wait { array } => {
            let array = array_ref::parse(&array)?;
            let progress = wait::Progress::for_output(json);
            let mut pause = || std::thread::sleep(wait::POLL);
            wait::run(
                &Control::open_checked()?,
                &sys,
                &array,
                &progress,
                json,
                &mut pause,
            )
        }
        Command::WaitClean { timeout } => {
            let mut pause = || std::thread::sleep(wait::POLL);
            wait_clean::run(
                &Control::open_checked()?,
                std::time::Duration::from_secs(timeout),
                &mut pause,
            )
        }
        Command::Detail { export: true, .. } if json => Err(CtlError::Usage(
            "--export and --json are different output formats; pick one".to_owned(),
        )),
        Command::Detail { scan: true, .. } => show::scan(&Control::open_checked()?, &sys, json),
        Command::Detail { array, export, .. } => {
            let array = array_ref::parse(array.as_deref().unwrap_or_default())?;
            let ctl = Control::open_checked()?;
            if export {
                show::export(&ctl, &sys, &array)
            } else {
                show::detail(&ctl, &sys, &array, json)
            }
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version are "errors" printed to stdout that exit 0.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { error::EXIT_USAGE } else { 0 });
        }
    };
    match run(cli) {
        Ok(stdout) => {
            print!("{stdout}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            if let CtlError::Partial { stdout, .. } | CtlError::Unhealthy { stdout, .. } = &e {
                print!("{stdout}");
            }
            eprintln!("graidctl: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("graidctl").chain(args.iter().copied()))
    }

    fn usage_error(args: &[&str]) -> String {
        let err = parse(args).unwrap_err();
        assert_eq!(err.exit_code(), error::EXIT_USAGE as i32, "{args:?}");
        err.to_string()
    }

    #[test]
    fn json_flag_is_global() {
        let cli = parse(&["version", "--json"]).unwrap();
        assert!(cli.json);
        let cli = parse(&["--json", "version"]).unwrap();
        assert!(cli.json);
        let cli = parse(&["list", "--json"]).unwrap();
        assert!(cli.json);
    }

    #[test]
    fn unknown_command_is_a_usage_error() {
        usage_error(&["frobnicate"]);
    }

    #[test]
    fn create_parses_mdadm_style_options() {
        let cli = parse(&[
            "create",
            "data",
            "--level",
            "raid10",
            "--chunk",
            "64K",
            "--uuid",
            "01234567:89abcdef:01234567:89abcdef",
            "/dev/a",
            "/dev/b",
        ])
        .unwrap();
        let Command::Create(args) = cli.command else {
            panic!("create")
        };
        assert_eq!(args.name, "data");
        assert_eq!(args.level, 10);
        assert_eq!(args.chunk, Some(128));
        assert_eq!(args.uuid.unwrap()[..2], [0x01, 0x23]);
        assert_eq!(args.members, ["/dev/a", "/dev/b"]);
        assert!(!args.force);
        let cli = parse(&["create", "m", "-l", "1", "-f", "/dev/a", "/dev/b"]).unwrap();
        let Command::Create(args) = cli.command else {
            panic!("create")
        };
        assert_eq!((args.level, args.chunk, args.force), (1, None, true));
    }

    #[test]
    fn create_rejects_bad_values_before_doing_anything() {
        let msg = usage_error(&["create", "d", "-l", "4", "/dev/a", "/dev/b"]);
        assert!(msg.contains("graid supports 0, 1, 10, 5 and 6"), "{msg}");
        let msg = usage_error(&["create", "d", "-l", "0", "-c", "3K", "/dev/a", "/dev/b"]);
        assert!(msg.contains("power of two"), "{msg}");
        let msg = usage_error(&["create", "a/b", "-l", "0", "/dev/a", "/dev/b"]);
        assert!(msg.contains("'/'"), "{msg}");
        let msg = usage_error(&["create", "d", "-l", "0", "--uuid", "xyz", "/dev/a"]);
        assert!(msg.contains("not a UUID"), "{msg}");
        usage_error(&["create", "d", "/dev/a", "/dev/b"]); // --level is required
        usage_error(&["create", "d", "-l", "0"]); // members are required
    }

    #[test]
    fn assemble_takes_members_or_scan() {
        let cli = parse(&["assemble", "/dev/a", "/dev/b"]).unwrap();
        let Command::Assemble(args) = cli.command else {
            panic!("assemble")
        };
        assert_eq!((args.scan, args.members.len()), (false, 2));
        let cli = parse(&["assemble", "--scan"]).unwrap();
        let Command::Assemble(args) = cli.command else {
            panic!("assemble")
        };
        assert!(args.scan && args.members.is_empty());
        usage_error(&["assemble"]);
        usage_error(&["assemble", "--scan", "/dev/a"]);
    }

    #[test]
    fn other_verbs_parse() {
        let cli = parse(&["stop", "--force", "/dev/graid0"]).unwrap();
        assert!(
            matches!(cli.command, Command::Stop { force: true, ref array } if array == "/dev/graid0")
        );
        assert!(matches!(parse(&["list"]).unwrap().command, Command::List));
        assert!(matches!(
            parse(&["detail", "data"]).unwrap().command,
            Command::Detail { export: false, .. }
        ));
        assert!(matches!(
            parse(&["detail", "--export", "/dev/graid0"])
                .unwrap()
                .command,
            Command::Detail { export: true, .. }
        ));
        // --json is global, so clap cannot refuse it with --export; run() does, before the module.
        let cli = parse(&["--json", "detail", "--export", "data"]).unwrap();
        let err = run(cli).unwrap_err();
        assert_eq!(err.exit_code(), error::EXIT_USAGE);
        assert!(matches!(
            parse(&["examine", "/dev/a"]).unwrap().command,
            Command::Examine { .. }
        ));
        assert!(matches!(
            parse(&["zero-superblock", "-f", "/dev/a"]).unwrap().command,
            Command::ZeroSuperblock { force: true, .. }
        ));
        usage_error(&["stop"]);
        usage_error(&["detail"]);
        usage_error(&["detail", "--scan", "data"]);
        assert!(matches!(
            parse(&["detail", "--scan"]).unwrap().command,
            Command::Detail { scan: true, .. }
        ));
        usage_error(&["examine"]);
    }

    #[test]
    fn help_documents_exit_codes_and_array_forms() {
        let help = Cli::command().render_long_help().to_string();
        for code in 0..=5 {
            assert!(
                help.contains(&format!("\n  {code}  ")),
                "exit status {code}"
            );
        }
        assert!(help.contains("/dev/graid/NAME"));
    }
}
