//! `graid-helper`: the parity helper's command line.

use clap::{Parser, Subcommand};
use graid_helper::device::{self, Attached};
use graid_helper::engines::{self, EngineChoice, GpuOptions};
use graid_helper::loopback::{Loopback, Shape};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "graid-helper", version, about = "graid's parity helper")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Attach to the module and compute its parity jobs until SIGTERM or SIGINT (logs to
    /// stderr). Re-attaches if the module lets go of it; refuses to run beside another helper.
    Run(RunArgs),
    /// Measure the ring with no kernel: a stand-in for the module submits jobs through the
    /// real layout and protocol, the helper's loop computes them; prints throughput with and
    /// without the ring, and the ring's cost per job.
    Loopback(LoopbackArgs),
    /// Which kinds of host memory the engine's device imports as a shared pool (anonymous,
    /// transparent huge pages, hugetlbfs, memfd, shared anonymous); one line each.
    MemoryProbe(MemoryProbeArgs),
    /// Write the man pages and shell completions into DIR (used by packaging).
    #[command(hide = true)]
    GenerateDocs { dir: std::path::PathBuf },
}

#[derive(clap::Args, Debug)]
struct MemoryProbeArgs {
    /// Parity engine (see `run`).
    #[arg(long, value_enum, default_value_t = EngineChoice::Vulkan)]
    engine: EngineChoice,
    #[command(flatten)]
    gpu: GpuOptions,
}

#[derive(clap::Args, Debug)]
struct LoopbackArgs {
    /// Data columns per stripe.
    #[arg(long, default_value_t = 8)]
    data: usize,
    /// Parity columns: 1 (RAID 5) or 2 (RAID 6).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=2))]
    parity: u8,
    /// Column (chunk) size in KiB.
    #[arg(long, default_value_t = 64)]
    chunk_kib: usize,
    /// Stripes per job.
    #[arg(long, default_value_t = 1)]
    stripes: usize,
    /// Jobs to run.
    #[arg(long, default_value_t = 20000)]
    jobs: usize,
    /// Jobs in flight at most (job slots).
    #[arg(long, default_value_t = 64)]
    in_flight: usize,
    /// Engine worker threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Check every job's parity against the reference engine (slow).
    #[arg(long)]
    verify: bool,
    /// Parity engine (see `run`).
    #[arg(long, value_enum, default_value_t = EngineChoice::Cpu)]
    engine: EngineChoice,
    #[command(flatten)]
    gpu: GpuOptions,
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// The module's helper device.
    #[arg(long, default_value = "/dev/graid-helper")]
    device: String,
    /// Parity engine: `cpu` (SIMD), `cuda` or `vulkan` (that GPU for every job, the CPU
    /// whenever the device fails), `auto` (CUDA, else Vulkan on a real GPU, for batches of
    /// `--gpu-min-batch-kib` and more; else the CPU).
    #[arg(long, value_enum, default_value_t = EngineChoice::Auto)]
    engine: EngineChoice,
    #[command(flatten)]
    gpu: GpuOptions,
    /// Engine worker threads (0: one per CPU).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// MiB of memory donated to the kernel for the jobs' columns (2 MiB per job in flight).
    #[arg(long, default_value_t = 64)]
    pool_mib: usize,
}

/// CPU seconds this process has used, every thread (a CPU Vulkan device's too).
fn cpu_seconds() -> f64 {
    // SAFETY: a zeroed rusage is valid; getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0.0;
    }
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Run(args) => run(&args),
        Command::Loopback(args) => loopback(&args),
        Command::GenerateDocs { dir } => {
            match graid_clidoc::write(<Cli as clap::CommandFactory>::command(), &dir) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("graid-helper: {}: {e}", dir.display());
                    ExitCode::FAILURE
                }
            }
        }
        Command::MemoryProbe(args) if args.engine == EngineChoice::Cpu => {
            println!("the CPU engine imports nothing: it computes in the pool where it is");
            ExitCode::SUCCESS
        }
        Command::MemoryProbe(args) => match engines::build(args.engine, 1, &args.gpu) {
            Ok(engine) => {
                println!("engine {}", engine.name());
                for line in graid_helper::memory_probe::run(engine.as_ref()) {
                    println!("{line}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("graid-helper: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

fn run(args: &RunArgs) -> ExitCode {
    let threads = if args.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        args.threads
    };
    let engine = match engines::build(args.engine, threads, &args.gpu) {
        Ok(engine) => engine,
        Err(e) => {
            eprintln!("graid-helper: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = device::catch_stop_signals() {
        eprintln!("graid-helper: cannot catch SIGTERM: {e}");
        return ExitCode::FAILURE;
    }
    let pool_bytes = args.pool_mib.saturating_mul(1 << 20);
    let mut served = 0u64;
    while !device::stopping() {
        let attached = match Attached::attach(&args.device, &engine.name(), pool_bytes) {
            Ok(attached) => attached,
            Err(e) => {
                eprintln!("graid-helper: {e}");
                return ExitCode::FAILURE;
            }
        };
        // SAFETY: the pool stays mapped while `attached` lives, and is forgotten before it goes.
        let shared = unsafe { engine.share_memory(Some(attached.pool_range())) };
        eprintln!(
            "graid-helper: attached to {}: engine {}, {} threads, pool {} MiB{}",
            args.device,
            engine.name(),
            threads,
            attached.pool_bytes >> 20,
            if shared {
                ", shared with the device"
            } else {
                ""
            }
        );
        let served_or = attached.serve(engine.as_ref(), &mut served);
        // SAFETY: forgetting needs nothing.
        unsafe { engine.share_memory(None) };
        match served_or {
            Ok(()) => {
                eprintln!("graid-helper: stopping: detached after {served} jobs");
                return ExitCode::SUCCESS;
            }
            Err(e) => {
                eprintln!("graid-helper: {e}; attaching again in 1 s ({served} jobs so far)");
                drop(attached);
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        }
    }
    ExitCode::SUCCESS
}

fn loopback(args: &LoopbackArgs) -> ExitCode {
    let engine = match engines::build(args.engine, args.threads, &args.gpu) {
        Ok(engine) => engine,
        Err(e) => {
            eprintln!("graid-helper: {e}");
            return ExitCode::FAILURE;
        }
    };
    let shape = Shape {
        data: args.data,
        parity: usize::from(args.parity),
        column_bytes: args.chunk_kib * 1024,
        stripes: args.stripes,
    };
    let (jobs, in_flight) = (args.jobs, args.in_flight.max(1));
    let loopback = Loopback::new(shape, in_flight);
    let report = loopback.run(jobs, engine.as_ref(), in_flight, args.verify);
    let cpu_before = cpu_seconds();
    let direct = loopback.direct(jobs, engine.as_ref(), in_flight);
    let cpu_direct = cpu_seconds() - cpu_before;
    let gb = (shape.data_bytes() * jobs as u64) as f64 / 1e9;
    let ring_s = report.elapsed.as_secs_f64();
    let direct_s = direct.as_secs_f64();
    println!(
        "{}+{} x {} KiB, {} stripe(s)/job, {} jobs, {} in flight, engine {}{}",
        args.data,
        args.parity,
        args.chunk_kib,
        args.stripes,
        jobs,
        in_flight,
        engine.name(),
        if report.shared {
            ", pool shared with the device"
        } else {
            ""
        }
    );
    println!(
        "through the ring: {:.2} GB/s, {:.1} us/job; direct: {:.2} GB/s, {:.1} us/job; \
         ring cost {:.2} us/job ({:.2} of direct)",
        gb / ring_s,
        ring_s * 1e6 / jobs as f64,
        gb / direct_s,
        direct_s * 1e6 / jobs as f64,
        (ring_s - direct_s) * 1e6 / jobs as f64,
        direct_s / ring_s
    );
    // The ring's run polls on both sides (a stand-in with no kernel to sleep in), so only the
    // direct run says what the engine costs the CPUs.
    println!(
        "direct: {:.2} s of CPU per GB ({:.0}% of one core)",
        cpu_direct / gb,
        cpu_direct * 100.0 / direct_s
    );
    if report.failed > 0 || report.refused > 0 {
        eprintln!(
            "graid-helper: {} jobs failed, {} completions refused",
            report.failed, report.refused
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
