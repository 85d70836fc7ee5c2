//! graid-logreplay: lists and replays dm-log-writes logs (the log format is described in
//! lib.rs). graid's crash tests put `log-writes` under each member of an array, write, then
//! replay each member's log to many cut points and assemble the copies
//! (selftests/tests/35-log-writes.sh).
//!
//! An entry number N as a cut means "the first N entries": `replay --to N` applies entries
//! 0..N, `--from M` starts at entry M of a target that already holds entries 0..M.

use clap::{Parser, Subcommand, ValueEnum};
use graid_logreplay::{replay, DiscardMode, Entry, Log, ReadAt, Target};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "graid-logreplay",
    version,
    about = "Lists and replays dm-log-writes logs"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The super block: entry count and block size.
    Info { log: String },
    /// Every entry (or those in --from..--to): index, flags, first block, blocks, mark.
    List {
        log: String,
        #[arg(long, default_value_t = 0)]
        from: usize,
        #[arg(long)]
        to: Option<usize>,
    },
    /// The marks: index and name, one a line.
    Marks { log: String },
    /// The index of the first mark NAME (at or after --from).
    Mark {
        log: String,
        name: String,
        #[arg(long, default_value_t = 0)]
        from: usize,
    },
    /// The flushes between two marks (or in the whole log), one a line: FLUSH BATCH_START
    /// AFTER SECTOR: a cut (entry number) in BATCH_START..=FLUSH loses some of the writes the
    /// flush made durable, FLUSH+1 is past it, AFTER also past the data of the PREFLUSH write
    /// it belongs to; SECTOR is that write's sector, `-` for an empty flush.
    Events {
        log: String,
        #[arg(long)]
        from_mark: Option<String>,
        #[arg(long)]
        to_mark: Option<String>,
    },
    /// Writes entries FROM..TO of the log onto TARGET (a device or file holding what the
    /// logged device held when the log began, plus entries 0..FROM).
    Replay {
        log: String,
        target: String,
        /// Start at this entry (the target already holds the ones before).
        #[arg(long, conflicts_with = "from_mark")]
        from: Option<usize>,
        /// Start at the first mark of this name.
        #[arg(long)]
        from_mark: Option<String>,
        /// Stop before this entry.
        #[arg(long, conflicts_with_all = ["to_mark", "to_end"])]
        to: Option<usize>,
        /// Stop at the first mark of this name (at or after the start).
        #[arg(long, conflicts_with = "to_end")]
        to_mark: Option<String>,
        /// Replay every entry.
        #[arg(long)]
        to_end: bool,
        /// What a logged discard does to the target.
        #[arg(long, value_enum, default_value_t = OnDiscard::Zero)]
        discard: OnDiscard,
        /// Sync the target at every flush and FUA write (it is synced at the end anyway).
        #[arg(long)]
        sync_each: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum OnDiscard {
    /// Write zeroes.
    Zero,
    /// Discard on the target (BLKDISCARD).
    Discard,
    /// Leave the blocks alone.
    Skip,
}

struct Device(File);

impl Target for Device {
    fn write_at(&mut self, data: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_all_at(data, offset)
    }
    fn discard(&mut self, offset: u64, len: u64) -> io::Result<()> {
        // BLKDISCARD, _IO(0x12, 119): a range of [start, length] in bytes.
        const BLKDISCARD: libc::c_ulong = 0x1277;
        let range: [u64; 2] = [offset, len];
        // SAFETY: the descriptor is open for the call's duration and `range` is the two u64s
        // the ioctl reads, alive across the call.
        let rc = unsafe { libc::ioctl(self.0.as_raw_fd(), BLKDISCARD, range.as_ptr()) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn size(&mut self) -> io::Result<u64> {
        ReadAt::size(&self.0)
    }
}

fn open_log(path: &str) -> Result<(File, Log), String> {
    let f = File::open(path).map_err(|e| format!("{path}: {e}"))?;
    let log = Log::read(&f).map_err(|e| format!("{path}: {e}"))?;
    Ok((f, log))
}

fn line(e: &Entry) -> String {
    format!(
        "{} {} {} {}{}",
        e.index,
        e.flag_names(),
        e.sector,
        e.nr_sectors,
        e.mark
            .as_deref()
            .map(|m| format!(" {m}"))
            .unwrap_or_default()
    )
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.cmd {
        Cmd::Info { log } => {
            let (_, l) = open_log(&log)?;
            println!("entries {}", l.sup.nr_entries);
            println!("sectorsize {}", l.sup.sectorsize);
            println!("marks {}", l.marks().len());
        }
        Cmd::List { log, from, to } => {
            let (_, l) = open_log(&log)?;
            let to = to.unwrap_or(l.entries.len()).min(l.entries.len());
            let text: String = l
                .entries
                .get(from..to)
                .unwrap_or(&[])
                .iter()
                .map(|e| line(e) + "\n")
                .collect();
            // A reader that stops early (`| head`) is no error.
            let _ = io::stdout().lock().write_all(text.as_bytes());
        }
        Cmd::Marks { log } => {
            let (_, l) = open_log(&log)?;
            for (i, m) in l.marks() {
                println!("{i} {m}");
            }
        }
        Cmd::Mark { log, name, from } => {
            let (_, l) = open_log(&log)?;
            println!(
                "{}",
                l.find_mark(&name, from)
                    .map_err(|e| format!("{log}: {e}"))?
            );
        }
        Cmd::Events {
            log,
            from_mark,
            to_mark,
        } => {
            let (_, l) = open_log(&log)?;
            let from = match &from_mark {
                Some(m) => l.find_mark(m, 0).map_err(|e| format!("{log}: {e}"))?,
                None => 0,
            };
            let to = match &to_mark {
                Some(m) => l.find_mark(m, from).map_err(|e| format!("{log}: {e}"))?,
                None => l.entries.len(),
            };
            for ev in l
                .flush_events(from, to)
                .map_err(|e| format!("{log}: {e}"))?
            {
                let write = ev.write.map_or("-".to_string(), |s| s.to_string());
                println!("{} {} {} {write}", ev.flush, ev.batch_start, ev.after);
            }
        }
        Cmd::Replay {
            log,
            target,
            from,
            from_mark,
            to,
            to_mark,
            to_end,
            discard,
            sync_each,
        } => {
            let (f, l) = open_log(&log)?;
            let from = match (from, &from_mark) {
                (Some(n), _) => n,
                (None, Some(m)) => l.find_mark(m, 0).map_err(|e| format!("{log}: {e}"))?,
                (None, None) => 0,
            };
            let to = match (to, &to_mark, to_end) {
                (Some(n), _, _) => n,
                (None, Some(m), _) => l.find_mark(m, from).map_err(|e| format!("{log}: {e}"))?,
                (None, None, true) => l.entries.len(),
                (None, None, false) => {
                    return Err("say where to stop: --to, --to-mark or --to-end".into())
                }
            };
            let ops = l.plan(from, to).map_err(|e| format!("{log}: {e}"))?;
            let dev = File::options()
                .write(true)
                .open(&target)
                .map_err(|e| format!("{target}: {e}"))?;
            let mode = match discard {
                OnDiscard::Zero => DiscardMode::Zero,
                OnDiscard::Discard => DiscardMode::Discard,
                OnDiscard::Skip => DiscardMode::Skip,
            };
            let done = replay(&f, &ops, &mut Device(dev), mode, sync_each)
                .map_err(|e| format!("{target}: {e}"))?;
            println!(
                "replayed entries {from}..{to}: {} writes ({} bytes), {} discards, {} flushes",
                done.writes, done.bytes, done.discards, done.flushes
            );
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("graid-logreplay: {e}");
            ExitCode::FAILURE
        }
    }
}
