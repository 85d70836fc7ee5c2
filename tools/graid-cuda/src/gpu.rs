//! The CUDA objects behind the engine: the device's primary context, the kernels' module,
//! and a few *lanes*, each a low-priority stream with its own device buffer.
//!
//! A batch's copies and kernels are laid out by `schedule.rs` and queued here. The batch ends
//! with a host function on each lane that wakes the caller: nothing spins.

use crate::limits::Limits;
use crate::schedule::{schedule, Op, Work};
use crate::CudaError;
use cudarc::driver::{result, sys, CudaContext, CudaStream, DriverError};
use graid_parity::device::Kernel;
use graid_parity::Job;
use std::ffi::{c_void, CString};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

/// `kernels/parity.ptx`, compiled from `kernels/parity.cu` by `build/ptx.sh`.
const PTX: &str = include_str!("../kernels/parity.ptx");
/// Threads per block.
const BLOCK: u32 = 256;

/// A stream and the device memory its jobs are computed in (freed when dropped, with the
/// context current and the stream idle).
struct Lane {
    stream: Arc<CudaStream>,
    buffer: sys::CUdeviceptr,
}

/// The kernels' module, unloaded when dropped (with the context current).
struct Module(sys::CUmodule);

/// The device and everything on it. Fields drop in order: the module and the lanes before the
/// context they live in (last).
pub(crate) struct Gpu {
    /// Held for its functions below, unloaded on drop.
    _module: Module,
    generate: sys::CUfunction,
    recover: sys::CUfunction,
    update: sys::CUfunction,
    lanes: Vec<Lane>,
    lane_bytes: usize,
    /// Blocks per launch at most: enough to fill the device, few enough to leave room beside.
    max_blocks: u32,
    limits: Limits,
    /// The host region registered with the driver (`share_memory`): its DMA needs no staging.
    registered: Option<(usize, usize)>,
    /// Set after a batch the device did not finish in time or failed: the engine stops.
    broken: Option<String>,
    name: String,
    pub(crate) direct_jobs: u64,
    pub(crate) staged_jobs: u64,
    ctx: Arc<CudaContext>,
}

fn driver(what: &'static str) -> impl FnOnce(DriverError) -> CudaError {
    move |source| CudaError::Driver { what, source }
}

impl Gpu {
    pub(crate) fn new(limits: Limits) -> Result<Self, CudaError> {
        limits.validate()?;
        if !crate::driver_present() {
            return Err(CudaError::NoDriver);
        }
        result::init().map_err(driver("init"))?;
        if result::device::get_count().map_err(driver("device count"))? < 1 {
            return Err(CudaError::NoDevice);
        }
        let ctx = CudaContext::new(limits.device).map_err(driver("context"))?;
        let name = ctx.name().map_err(driver("device name"))?;
        let sms = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(driver("multiprocessor count"))?;
        let ptx = CString::new(PTX).map_err(|_| CudaError::Ptx)?;
        // SAFETY: `ptx` is a NUL-terminated PTX image, read during the call only; the context
        // is current on this thread (CudaContext::new binds it).
        let module = Module(
            unsafe { result::module::load_data(ptx.as_ptr().cast()) }
                .map_err(driver("loading the kernels"))?,
        );
        let function = |name: &str| {
            let name = CString::new(name).map_err(|_| CudaError::Ptx)?;
            // SAFETY: the module is loaded and outlives the function handle (both live in Gpu,
            // the module dropped last).
            unsafe { result::module::get_function(module.0, name) }.map_err(driver("kernel"))
        };
        let generate = function("graid_generate")?;
        let recover = function("graid_recover")?;
        let update = function("graid_update")?;
        // The lowest priority the device has: an AI job's kernels go first.
        let (lowest, _) = result::stream::get_priority_range().map_err(driver("priorities"))?;
        let lane_bytes = limits.memory / limits.streams;
        let mut lanes = Vec::with_capacity(limits.streams);
        for _ in 0..limits.streams {
            let stream = ctx
                .new_stream_with_priority(lowest)
                .map_err(driver("stream"))?;
            // SAFETY: a plain allocation in the current context, freed in Drop.
            let buffer =
                unsafe { result::malloc_sync(lane_bytes) }.map_err(driver("device memory"))?;
            lanes.push(Lane { stream, buffer });
        }
        Ok(Self {
            _module: module,
            generate,
            recover,
            update,
            lanes,
            lane_bytes,
            max_blocks: u32::try_from(sms.max(1)).unwrap_or(1).saturating_mul(4),
            limits,
            registered: None,
            broken: None,
            name,
            direct_jobs: 0,
            staged_jobs: 0,
            ctx,
        })
    }

    pub(crate) fn device_name(&self) -> &str {
        &self.name
    }

    /// Registers `region` with the driver (page-locked, DMA straight from it), or unregisters
    /// the current one (`None`). Returns whether the region is registered.
    ///
    /// # Safety
    /// The region must stay mapped and unmoved until it is unregistered (another call, or the
    /// engine dropped).
    pub(crate) unsafe fn share(
        &mut self,
        region: Option<(*mut u8, usize)>,
    ) -> Result<bool, CudaError> {
        self.ctx
            .bind_to_thread()
            .map_err(driver("binding the context"))?;
        if let Some((start, _)) = self.registered.take() {
            // SAFETY: `start` was registered by this engine and not unregistered since.
            unsafe { sys::cuMemHostUnregister(start as *mut c_void) }
                .result()
                .map_err(driver("unregistering the pool"))?;
        }
        let Some((start, len)) = region else {
            return Ok(false);
        };
        // SAFETY: the caller keeps the region mapped until it is unregistered.
        unsafe { sys::cuMemHostRegister_v2(start.cast(), len, sys::CU_MEMHOSTREGISTER_PORTABLE) }
            .result()
            .map_err(driver("registering the pool"))?;
        self.registered = Some((start as usize, len));
        Ok(true)
    }

    /// Whether `[ptr, ptr + len)` lies in the registered region.
    fn is_registered(&self, ptr: *const u8, len: usize) -> bool {
        self.registered.is_some_and(|(start, size)| {
            let at = ptr as usize;
            at >= start && at + len <= start + size
        })
    }

    /// Computes `jobs` (validated) and waits for them. On an
    /// error nothing of the device's is still running: the caller may compute them itself.
    pub(crate) fn compute(&mut self, jobs: &mut [Job<'_>]) -> Result<(), CudaError> {
        if let Some(why) = &self.broken {
            return Err(CudaError::Disabled(why.clone()));
        }
        self.ctx
            .bind_to_thread()
            .map_err(driver("binding the context"))?;
        let done = Arc::new(Signal::default());
        let queued = self.enqueue_all(jobs, &done);
        let finished = queued.and_then(|used| self.wait(&done, used));
        if let Err(e) = &finished {
            // Drain the device before the caller touches the columns again: no late DMA may
            // land in them. A device that never drains holds this thread, and the kernel's
            // deadlines then take the helper's jobs back.
            let _ = self.ctx.synchronize();
            self.broken = Some(e.to_string());
        }
        finished
    }

    /// Queues every job's copies and kernels (`schedule`); returns how many lanes took work
    /// (each ends with a host function that signals `done`).
    fn enqueue_all(
        &mut self,
        jobs: &mut [Job<'_>],
        done: &Arc<Signal>,
    ) -> Result<usize, CudaError> {
        let works = jobs
            .iter_mut()
            .map(Work::of)
            .collect::<Option<Vec<Work>>>()
            .ok_or(CudaError::Unsupported)?;
        for work in &works {
            if work
                .columns
                .iter()
                .all(|c| self.is_registered(c.host, work.len))
            {
                self.direct_jobs += 1;
            } else {
                self.staged_jobs += 1;
            }
        }
        let (ops, used) = schedule(&works, self.lanes.len(), self.lane_bytes);
        for op in &ops {
            self.enqueue(op)?;
        }
        for lane in &self.lanes[..used] {
            let arg = Arc::into_raw(done.clone()) as *mut c_void;
            // SAFETY: `lane_done` takes back the reference `arg` holds, once; it makes no CUDA
            // call (not allowed in a host function).
            unsafe {
                result::stream::launch_host_function(lane.stream.cu_stream(), lane_done, arg)
            }
            .map_err(|e| {
                // SAFETY: never queued, so ours to release.
                drop(unsafe { Arc::from_raw(arg as *const Signal) });
                CudaError::Driver {
                    what: "queueing the completion",
                    source: e,
                }
            })?;
        }
        Ok(used)
    }

    /// Queues one operation on its lane's stream.
    fn enqueue(&self, op: &Op) -> Result<(), CudaError> {
        match *op {
            Op::CopyIn {
                lane,
                host,
                offset,
                bytes,
            } => {
                let lane = &self.lanes[lane];
                // SAFETY: the host range lies in a column of the batch, which the caller holds
                // until the device is done with it (`compute` waits, or drains the device); the
                // device range lies in the lane's buffer (`schedule` keeps to `lane_bytes`).
                unsafe {
                    sys::cuMemcpyHtoDAsync_v2(
                        lane.buffer + offset as u64,
                        host.cast(),
                        bytes,
                        lane.stream.cu_stream(),
                    )
                }
                .result()
                .map_err(driver("copying to the device"))
            }
            Op::CopyOut {
                lane,
                offset,
                host,
                bytes,
            } => {
                let lane = &self.lanes[lane];
                // SAFETY: as for the copies in; the host range lies in a column the job lent
                // mutably, which nothing reads until the batch is done.
                unsafe {
                    sys::cuMemcpyDtoHAsync_v2(
                        host.cast_mut().cast(),
                        lane.buffer + offset as u64,
                        bytes,
                        lane.stream.cu_stream(),
                    )
                }
                .result()
                .map_err(driver("copying from the device"))
            }
            Op::Launch {
                lane,
                kernel,
                constants,
            } => {
                let lane = &self.lanes[lane];
                // The parameters after the column pointer (kernels/parity.cu): graid_generate's
                // (words, data, pq) are constants[1..4], graid_recover's (words, data, parity,
                // lost_a, lost_b, mode, c0, c1) constants[1..9], graid_update's (words, changes,
                // parity, coef[8]) constants[1..12], the last eight as one array by value.
                let (function, count) = match kernel {
                    Kernel::Generate => (self.generate, 3),
                    Kernel::Recover => (self.recover, 8),
                    Kernel::Update => (self.update, 3),
                };
                let mut k = constants;
                let mut columns = lane.buffer;
                let mut params: Vec<*mut c_void> = vec![(&raw mut columns).cast()];
                params.extend(
                    k[1..=count]
                        .iter_mut()
                        .map(|v| (v as *mut u32).cast::<c_void>()),
                );
                if kernel == Kernel::Update {
                    params.push(k[4..].as_mut_ptr().cast());
                }
                let words = k[1] as usize;
                let blocks = u32::try_from(words.div_ceil(BLOCK as usize))
                    .unwrap_or(u32::MAX)
                    .clamp(1, self.max_blocks);
                // SAFETY: the function's parameters are exactly these (kernels/parity.cu), read
                // during the call; the pointer is the lane's buffer, which holds every column
                // of the slice (`schedule`).
                unsafe {
                    result::launch_kernel(
                        function,
                        (blocks, 1, 1),
                        (BLOCK, 1, 1),
                        0,
                        lane.stream.cu_stream(),
                        &mut params,
                    )
                }
                .map_err(driver("launching a kernel"))
            }
        }
    }

    /// Waits until `used` lanes signalled `done`, for the configured time at most.
    fn wait(&self, done: &Signal, used: usize) -> Result<(), CudaError> {
        let deadline = Instant::now() + self.limits.timeout;
        let mut finished = done.finished.lock().map_err(|_| CudaError::Poisoned)?;
        while *finished < used {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(CudaError::Timeout(self.limits.timeout));
            }
            finished = done
                .wake
                .wait_timeout(finished, left)
                .map_err(|_| CudaError::Poisoned)?
                .0;
        }
        drop(finished);
        // A failed copy or kernel shows in the stream's status, not in the host function.
        for lane in &self.lanes[..used] {
            lane.stream.synchronize().map_err(driver("a batch"))?;
        }
        Ok(())
    }
}

impl Drop for Gpu {
    /// Idles the device and unregisters the pool; the fields then free the rest.
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_err() {
            return;
        }
        let _ = self.ctx.synchronize();
        // SAFETY: no pointer into the region is in use (the device is idle).
        let _ = unsafe { self.share(None) };
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        // SAFETY: allocated for this lane, whose stream has nothing queued any more (the
        // engine is dropped after `Gpu::drop` idled the device, or `Gpu::new` failed before
        // any use); the context is current on this thread (both bind it first).
        let _ = unsafe { result::free_sync(self.buffer) };
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: loaded in `Gpu::new`; its function handles are not used after the Gpu that
        // holds them (and this module) is dropped; the context is current (as for Lane).
        let _ = unsafe { result::module::unload(self.0) };
    }
}

/// Completions of a batch's lanes.
#[derive(Default)]
struct Signal {
    finished: Mutex<usize>,
    wake: Condvar,
}

/// The host function at the end of each lane's share of a batch.
unsafe extern "C" fn lane_done(arg: *mut c_void) {
    // SAFETY: `arg` is a reference to a Signal, made by Arc::into_raw for this one call.
    let signal = unsafe { Arc::from_raw(arg as *const Signal) };
    if let Ok(mut finished) = signal.finished.lock() {
        *finished += 1;
        signal.wake.notify_all();
    };
}
