//! The API's replay thread: the process's shared replay, remade when asked and at most
//! every `state_refresh`, at the lowest CPU priority.

use crate::evaluation::ratio::RatioParams;
use crate::ledger::OwnLog;
use crate::replay::latest_replay::LatestReplay;
use crate::replay::Replay;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Replays the store on one background thread at the lowest CPU priority, when asked and
/// at most every `state_refresh`, so that readers of `state` never take the cores the
/// validator plays on. The replay is the process's shared [`LatestReplay`]: it folds only
/// blocks that are new since the last replay anyone in the process made. The thread ends
/// when the router is dropped.
pub(super) struct Replayer {
    pub(super) latest: watch::Receiver<Option<Arc<Replay>>>,
    pub(super) wanted: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
}

impl Replayer {
    pub(super) fn start(
        log: Arc<OwnLog>,
        params: RatioParams,
        every: Duration,
        replays: Arc<LatestReplay>,
    ) -> Replayer {
        let (sender, latest) = watch::channel(None);
        let wanted = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let signal = wanted.clone();
        let spawned = std::thread::Builder::new().name("af-http-replay".into()).spawn(move || {
            lower_priority();
            let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build();
            let mut last = Instant::now() - every;
            while !sender.is_closed() {
                {
                    let (flag, condvar) = &*signal;
                    let mut asked = flag.lock().unwrap_or_else(|e| e.into_inner());
                    if !*asked || last.elapsed() < every {
                        let _ = condvar.wait_timeout(asked, Duration::from_millis(250));
                        continue;
                    }
                    *asked = false;
                }
                last = Instant::now();
                let run = || replays.get(&log.store, &params);
                let fresh = match &pool {
                    Ok(pool) => pool.install(run),
                    Err(_) => run(),
                };
                if let Ok(fresh) = fresh {
                    let _ = sender.send(Some(fresh));
                }
            }
        });
        if spawned.is_err() {
            eprintln!("af: could not start the HTTP API's replay thread; /af/v1/state will answer 503");
        }
        Replayer { latest, wanted }
    }

    pub(super) fn demand(&self) {
        let (flag, condvar) = &*self.wanted;
        *flag.lock().unwrap_or_else(|e| e.into_inner()) = true;
        condvar.notify_one();
    }
}

/// Background work yields to the validator: this thread gets the lowest priority.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority on the calling thread's own id only changes its nice value.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 19);
    }
}
