//! `graid-probe hostile MODE`: a parity helper that attaches like `graid-helper run`, waits for
//! a real job, then breaks the protocol in one way. The module must detach it (`EPROTO`) and
//! compute every job itself; the selftest then checks the data and the parity.
//!
//! - `wrong-id`: completes a job that was never sent;
//! - `stale`: completes a real job with a former generation;
//! - `twice`: completes a real job twice;
//! - `garbage`: publishes a CQ tail claiming more completions than the ring holds;
//! - `scribble`: answers every job "failed" (the kernel computes it) while a second thread
//!   writes random bytes all over the pool, then closes the device and keeps writing for a
//!   few seconds: nothing of it may reach an array;
//! - `liar`: keeps to the protocol but answers every job OK with random bytes where the
//!   parity should be: the kernel's check of its results must catch it (the first jobs of a
//!   helper are all checked) before any reaches a member.
//!
//! Two more serve jobs for a while instead of breaking the protocol at the first:
//!
//! - `turncoat=N`: computes its first `N` jobs right (past the kernel's check of every one of
//!   a new helper's first 16), then answers every job OK with random bytes, until the module
//!   detaches it (it then exits 0, saying how many it answered right and wrong). A rebuild's
//!   recoveries and a scrub's parity must never be written from its lies (test 27);
//! - `no-batch`: attaches without `RING_FEATURE_BATCH`, as an older helper, and computes every
//!   job for 5 s: it fails if any job carries more than one stripe, or none came.

use graid_abi::ring::{
    Cqe, CQ_ENTRIES, CQ_HEAD_OFFSET, CQ_TAIL_OFFSET, JOB_OP_PQ, JOB_OP_XOR, JOB_STATUS_FAILED,
    JOB_STATUS_OK, RING_FEATURE_RECOVER,
};
use graid_helper::control::{decode_sqe, encode_cqe, CQ, SQ, SQE_WORDS};
use graid_helper::device::Attached;
use graid_helper::engines::{self, EngineChoice, GpuOptions};
use graid_helper::exec::Pool;
use std::cell::Cell;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const DEVICE: &str = "/dev/graid-helper";

/// Waits up to `limit` for a job on the SQ and takes it.
fn next_job(helper: &Attached, limit: Duration) -> Option<graid_abi::ring::Sqe> {
    let area = helper.area();
    let start = Instant::now();
    let mut words = [0u32; SQE_WORDS];
    while start.elapsed() < limit {
        if SQ.pop(&area, &mut words).ok()? {
            return Some(decode_sqe(&words));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

fn complete(helper: &Attached, job: u32, generation: u32, status: u32) {
    let cqe = Cqe {
        job,
        generation,
        status,
        reserved: 0,
    };
    while !CQ.push(&helper.area(), &encode_cqe(&cqe)) {
        std::thread::yield_now();
    }
}

/// Writes changing bytes over every column of `sqe`'s area (its table read for where they
/// are), as a helper that computes nothing but claims it did.
fn lie(base: usize, len: usize, sqe: &graid_abi::ring::Sqe) {
    let table = sqe.columns_offset as usize;
    let parity = match sqe.op {
        JOB_OP_XOR => 1,
        JOB_OP_PQ => 2,
        _ => usize::from(sqe.parity_columns.min(2)),
    };
    let columns = (usize::from(sqe.data_columns) + parity) * sqe.stripes as usize;
    let column_bytes = sqe.column_bytes as usize;
    let mut seed = u64::from(sqe.generation) | 1;
    for i in 0..columns {
        let entry = table + i * 8;
        if entry + 8 > len {
            return;
        }
        // SAFETY: inside this process's pool mapping (checked), 8-aligned (the kernel's table).
        let start = unsafe { std::ptr::read_volatile((base + entry) as *const u64) } as usize;
        for at in (0..column_bytes).step_by(8) {
            if start + at + 8 > len {
                break;
            }
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            // SAFETY: as above; the job's columns are the helper's until it completes it.
            unsafe { std::ptr::write_volatile((base + start + at) as *mut u64, seed) };
        }
    }
}

/// Fills `len` bytes at `base` with changing bytes until `stop`.
fn scribble(base: usize, len: usize, stop: &AtomicBool) {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    while !stop.load(Ordering::Relaxed) {
        for at in (0..len).step_by(512) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            // SAFETY: `base..base + len` is this process's pool mapping, alive until the
            // scribbler is joined; the kernel reads only the columns of jobs completed ok.
            unsafe { std::ptr::write_volatile((base + at) as *mut u64, seed) };
        }
    }
}

/// Serves jobs right with the CPU engine, each handed to `answer(sqe, status)` (which may
/// lie about it and returns the status to complete it with), until `answer` says stop
/// (`None` from `until`), or the module detaches it (`Ok`) or `limit` passes (`Err`).
fn serve(
    helper: &Attached,
    limit: Duration,
    mut answer: impl FnMut(&graid_abi::ring::Sqe, u32) -> u32,
    mut done: impl FnMut() -> bool,
) -> Result<(), String> {
    let engine = engines::build(EngineChoice::Cpu, 1, &GpuOptions::default())?;
    let (base, len) = helper.pool_range();
    // SAFETY: the helper's pool mapping, alive as long as `helper`; a job's columns are this
    // helper's from the SQ entry's publication to its completion (the protocol).
    let pool = unsafe { Pool::new(base, len) };
    let area = helper.area();
    let start = Instant::now();
    let mut words = [0u32; SQE_WORDS];
    while start.elapsed() < limit {
        let mut sqes = Vec::new();
        while sqes.len() < 64 && SQ.pop(&area, &mut words).map_err(|_| "bad SQ indices")? {
            sqes.push(decode_sqe(&words));
        }
        let status = pool.execute(&sqes, &*engine);
        for (sqe, status) in sqes.iter().zip(status) {
            let status = answer(sqe, status);
            complete(helper, sqe.job, sqe.generation, status);
        }
        match helper.enter(0) {
            Ok(_) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::EPROTO | libc::EINVAL)) => {
                return Ok(());
            }
            Err(e) => return Err(format!("ENTER: {e}")),
        }
        if done() {
            return Ok(());
        }
        if sqes.is_empty() {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    Err(format!("still attached after {} s", limit.as_secs()))
}

/// `turncoat=N`: see the module's documentation.
fn turncoat(right: u64) -> ExitCode {
    let helper = match Attached::attach(DEVICE, "turncoat", 8 << 20) {
        Ok(helper) => helper,
        Err(e) => {
            eprintln!("graid-probe hostile: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (base, len) = helper.pool_range();
    let (mut answered, mut lies) = (0u64, 0u64);
    let served = serve(
        &helper,
        Duration::from_secs(600),
        |sqe, status| {
            if status == JOB_STATUS_OK && answered >= right {
                lie(base as usize, len, sqe);
                lies += 1;
            }
            answered += 1;
            status
        },
        || false,
    );
    println!(
        "turncoat: {} jobs answered right, {lies} lied about",
        answered - lies
    );
    match served {
        Ok(()) if lies > 0 => {
            println!("detached");
            ExitCode::SUCCESS
        }
        Ok(()) => {
            eprintln!("graid-probe hostile: turncoat: detached before it lied");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("graid-probe hostile: turncoat: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `no-batch`: see the module's documentation.
fn no_batch() -> ExitCode {
    let helper = match Attached::attach_with(DEVICE, "no-batch", 8 << 20, RING_FEATURE_RECOVER) {
        Ok(helper) => helper,
        Err(e) => {
            eprintln!("graid-probe hostile: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (jobs, mut batched) = (Cell::new(0u64), 0u64);
    // Five seconds of jobs, and longer until the first comes: the writers start beside this
    // probe, and on a slow (debug, emulated, busy) machine they may take seconds to write.
    let until = Instant::now() + Duration::from_secs(5);
    let served = serve(
        &helper,
        Duration::from_secs(60),
        |sqe, status| {
            jobs.set(jobs.get() + 1);
            if sqe.stripes > 1 {
                batched += 1;
            }
            status
        },
        || Instant::now() >= until && jobs.get() > 0,
    );
    let jobs = jobs.get();
    println!("no-batch: {jobs} jobs, {batched} of several stripes");
    if let Err(e) = served {
        eprintln!("graid-probe hostile: no-batch: {e}");
        return ExitCode::FAILURE;
    }
    if jobs == 0 || batched > 0 {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

pub fn run(mode: &str) -> ExitCode {
    if let Some(right) = mode.strip_prefix("turncoat=") {
        return match right.parse() {
            Ok(right) => turncoat(right),
            Err(_) => {
                eprintln!("graid-probe hostile: turncoat=N: N is a number of jobs");
                ExitCode::from(2)
            }
        };
    }
    if mode == "no-batch" {
        return no_batch();
    }
    let helper = match Attached::attach(DEVICE, "hostile", 8 << 20) {
        Ok(helper) => helper,
        Err(e) => {
            eprintln!("graid-probe hostile: {e}");
            return ExitCode::FAILURE;
        }
    };
    let Some(sqe) = next_job(&helper, Duration::from_secs(60)) else {
        eprintln!("graid-probe hostile: no job came in 60 s");
        return ExitCode::FAILURE;
    };
    match mode {
        "wrong-id" => complete(&helper, sqe.job + 100_000, sqe.generation, JOB_STATUS_OK),
        "stale" => complete(
            &helper,
            sqe.job,
            sqe.generation.wrapping_sub(1),
            JOB_STATUS_OK,
        ),
        "twice" => {
            complete(&helper, sqe.job, sqe.generation, JOB_STATUS_FAILED);
            complete(&helper, sqe.job, sqe.generation, JOB_STATUS_FAILED);
        }
        "garbage" => {
            let area = helper.area();
            let head = area.load(CQ_HEAD_OFFSET, Ordering::Acquire);
            area.store(
                CQ_TAIL_OFFSET,
                head.wrapping_add(CQ_ENTRIES + 7),
                Ordering::Release,
            );
        }
        "scribble" => return scribble_mode(helper, sqe),
        "liar" => {
            let (base, len) = helper.pool_range();
            lie(base as usize, len, &sqe);
            complete(&helper, sqe.job, sqe.generation, JOB_STATUS_OK);
        }
        _ => {
            eprintln!("graid-probe hostile: unknown mode {mode}");
            return ExitCode::from(2);
        }
    }
    match helper.enter(0) {
        Err(e) if e.raw_os_error() == Some(libc::EPROTO) => {
            println!("detached: EPROTO");
            ExitCode::SUCCESS
        }
        other => {
            eprintln!("graid-probe hostile: {mode}: ENTER answered {other:?}, expected EPROTO");
            ExitCode::FAILURE
        }
    }
}

fn scribble_mode(helper: Attached, first: graid_abi::ring::Sqe) -> ExitCode {
    let (base, len) = helper.pool_range();
    let (base, stop) = (base as usize, Arc::new(AtomicBool::new(false)));
    let scribbler = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || scribble(base, len, &stop))
    };
    complete(&helper, first.job, first.generation, JOB_STATUS_FAILED);
    let mut answered = 1u64;
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        if let Some(sqe) = next_job(&helper, Duration::from_millis(50)) {
            complete(&helper, sqe.job, sqe.generation, JOB_STATUS_FAILED);
            answered += 1;
        }
        if helper.enter(0).is_err() {
            eprintln!("graid-probe hostile: scribble: ENTER failed");
            stop.store(true, Ordering::Relaxed);
            let _ = scribbler.join();
            return ExitCode::FAILURE;
        }
    }
    // Closed, and still writing: a GPU whose pin outlived the file.
    let memory = helper.close_keeping_pool();
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let _ = scribbler.join();
    drop(memory);
    println!("scribbled: {answered} jobs answered failed");
    ExitCode::SUCCESS
}
