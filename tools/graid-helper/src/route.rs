//! Where `--engine auto` sends a batch's GPU share: by size, then by load.
//!
//! - **Size**: a share with fewer bytes of columns than the floor stays on the CPU. The trip
//!   to the device costs more than the CPU's work, and small writes keep their latency.
//! - **Load**: a GPU that a co-running job keeps busy gets slower. The router keeps a moving
//!   average of the time per byte each side has taken for shares above the floor, and sends
//!   a share to the CPU while the GPU's is worse than the CPU's by more than a margin. The
//!   CPU then carries the parity, and the other job gets the GPU back.
//! - **Probes**: the slower side would otherwise never be measured again. Once per probe
//!   interval a share goes to the side not chosen, so a GPU that is free again is noticed (and
//!   the CPU's figure stays current). At one share a second the probes cost next to nothing.
//!
//! Pure logic with the clock passed in, so the tests drive it with made-up times.

use std::time::{Duration, Instant};

/// Where a share goes, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// To the GPU.
    Gpu,
    /// To the GPU, to measure it (the CPU is the faster side).
    GpuProbe,
    /// To the CPU: smaller than the floor.
    Small,
    /// To the CPU: the GPU has been slower than the CPU of late.
    Loaded,
    /// To the CPU, to measure it (the GPU is the faster side).
    CpuProbe,
}

/// A moving average of nanoseconds per byte.
#[derive(Clone, Copy, Debug, Default)]
struct Rate(Option<f64>);

impl Rate {
    /// Weight of each new sample: a change of load shows within a few batches.
    const WEIGHT: f64 = 0.25;

    fn add(&mut self, bytes: usize, took: Duration) {
        let sample = Self::sample(bytes, took);
        self.0 = Some(match self.0 {
            None => sample,
            Some(average) => average + (sample - average) * Self::WEIGHT,
        });
    }

    /// A probe is the only sample of its side in a while: it replaces the average, so a GPU
    /// that is free again wins back its shares at the first probe, not after several.
    fn set(&mut self, bytes: usize, took: Duration) {
        self.0 = Some(Self::sample(bytes, took));
    }

    fn sample(bytes: usize, took: Duration) -> f64 {
        took.as_nanos() as f64 / bytes.max(1) as f64
    }
}

/// The policy's state: the floor and each side's recent rate.
#[derive(Debug)]
pub struct Router {
    min_bytes: usize,
    /// Whether load counts at all (`--engine cuda`/`vulkan` use the GPU whatever its load).
    by_load: bool,
    gpu: Rate,
    cpu: Rate,
    last_probe: Option<Instant>,
}

impl Router {
    /// How much slower than the CPU the GPU may be before shares leave it: the GPU also
    /// spares CPU time, and a margin keeps two close rates from flapping.
    pub const MARGIN: f64 = 1.25;
    /// How often the side not chosen gets a share to measure.
    pub const PROBE_INTERVAL: Duration = Duration::from_secs(1);

    /// A router with a floor of `min_bytes`, that also weighs load if `by_load`.
    pub fn new(min_bytes: usize, by_load: bool) -> Self {
        Self {
            min_bytes,
            by_load,
            gpu: Rate::default(),
            cpu: Rate::default(),
            last_probe: None,
        }
    }

    /// Where a share of `bytes` goes at `now`.
    pub fn route(&mut self, bytes: usize, now: Instant) -> Route {
        if bytes < self.min_bytes {
            return Route::Small;
        }
        if !self.by_load {
            return Route::Gpu;
        }
        let (Some(gpu), cpu) = (self.gpu.0, self.cpu.0) else {
            return Route::Gpu; // not measured yet
        };
        let probe_due = self
            .last_probe
            .is_none_or(|last| now.duration_since(last) >= Self::PROBE_INTERVAL);
        let gpu_slower = cpu.is_some_and(|cpu| gpu > cpu * Self::MARGIN);
        match (gpu_slower, probe_due) {
            (false, false) => Route::Gpu,
            (true, false) => Route::Loaded,
            (false, true) => {
                self.last_probe = Some(now);
                Route::CpuProbe
            }
            (true, true) => {
                self.last_probe = Some(now);
                Route::GpuProbe
            }
        }
    }

    /// Tells the router how long a share of `bytes` took where `route` sent it. Shares under
    /// the floor say nothing about bulk rates, and are not counted.
    pub fn took(&mut self, route: Route, bytes: usize, took: Duration) {
        match route {
            Route::Gpu => self.gpu.add(bytes, took),
            Route::GpuProbe => self.gpu.set(bytes, took),
            Route::Loaded => self.cpu.add(bytes, took),
            Route::CpuProbe => self.cpu.set(bytes, took),
            Route::Small => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    /// Runs `n` shares of 1 MiB, `step` apart, each taking `gpu` or `cpu` per MiB where routed;
    /// returns the routes.
    fn run(
        router: &mut Router,
        start: Instant,
        n: usize,
        step: Duration,
        gpu: Duration,
        cpu: Duration,
    ) -> Vec<Route> {
        (0..n)
            .map(|i| {
                let route = router.route(MIB, start + step * i as u32);
                let on_gpu = matches!(route, Route::Gpu | Route::GpuProbe);
                let took = if on_gpu { gpu } else { cpu };
                router.took(route, MIB, took);
                route
            })
            .collect()
    }

    fn count(routes: &[Route], which: Route) -> usize {
        routes.iter().filter(|&&r| r == which).count()
    }

    #[test]
    fn shares_under_the_floor_stay_on_the_cpu() {
        let mut router = Router::new(MIB, true);
        assert_eq!(router.route(MIB - 1, Instant::now()), Route::Small);
        assert_eq!(router.route(MIB, Instant::now()), Route::Gpu);
        let mut forced = Router::new(MIB, false);
        assert_eq!(forced.route(MIB - 1, Instant::now()), Route::Small);
    }

    #[test]
    fn a_fast_gpu_takes_the_bulk_and_the_cpu_is_probed_once_a_second() {
        let mut router = Router::new(MIB, true);
        let step = Duration::from_millis(10);
        let routes = run(
            &mut router,
            Instant::now(),
            1000, // ten seconds
            step,
            Duration::from_micros(25),
            Duration::from_micros(400),
        );
        assert_eq!(count(&routes, Route::Loaded), 0);
        let probes = count(&routes, Route::CpuProbe);
        assert!((9..=11).contains(&probes), "{probes} CPU probes in 10 s");
        assert_eq!(count(&routes, Route::Gpu), 1000 - probes);
    }

    #[test]
    fn a_loaded_gpu_hands_shares_to_the_cpu_and_gets_them_back_when_free() {
        let mut router = Router::new(MIB, true);
        let start = Instant::now();
        let step = Duration::from_millis(10);
        let (fast, cpu, busy) = (
            Duration::from_micros(25),
            Duration::from_micros(400),
            Duration::from_millis(4),
        );
        // Measured: the GPU fast, then the CPU at its first probe.
        run(&mut router, start, 200, step, fast, cpu);
        // A co-running job takes the GPU: ten times slower than the CPU.
        let loaded = run(&mut router, start + step * 200, 1000, step, busy, cpu);
        assert!(
            count(&loaded[100..], Route::Loaded) >= 880,
            "the CPU did not take over: {} loaded of 900",
            count(&loaded[100..], Route::Loaded)
        );
        assert!(
            count(&loaded[10..], Route::Gpu) == 0,
            "a loaded GPU got shares besides its probes"
        );
        let probes = count(&loaded, Route::GpuProbe);
        assert!((9..=11).contains(&probes), "{probes} GPU probes in 10 s");
        // The job ends: the next probe finds the GPU fast and it takes over again.
        let freed = run(&mut router, start + step * 1200, 500, step, fast, cpu);
        assert!(
            count(&freed[300..], Route::Gpu) >= 190,
            "the GPU did not get its shares back"
        );
    }

    #[test]
    fn without_load_the_gpu_gets_everything_above_the_floor() {
        let mut router = Router::new(MIB, false);
        let routes = run(
            &mut router,
            Instant::now(),
            300,
            Duration::from_millis(10),
            Duration::from_millis(4),
            Duration::from_micros(400),
        );
        assert_eq!(count(&routes, Route::Gpu), 300);
    }

    #[test]
    fn close_rates_do_not_flap() {
        let mut router = Router::new(MIB, true);
        let routes = run(
            &mut router,
            Instant::now(),
            500,
            Duration::from_millis(10),
            Duration::from_micros(110),
            Duration::from_micros(100),
        );
        assert_eq!(
            count(&routes, Route::Loaded),
            0,
            "a GPU within the margin lost shares"
        );
    }
}
