//! A mapping's own `concurrency:` inside the engine's image window: its images wait for one of
//! the mapping's slots before they join the window, so a capped mapping never holds a slot of
//! the window it cannot use while other mappings' images wait.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A mapping plan's index and its own `concurrency:` (none for a mapping that failed).
pub(super) fn of(m: &crate::plan::MappingPlan) -> (usize, Option<usize>) {
    (m.index, m.outcome.as_ref().ok().and_then(|r| r.concurrency))
}

/// Images of one mapping at once in a window of `images_in_flight`: its cap inside that.
pub(super) fn window(cap: Option<usize>, images_in_flight: usize) -> usize {
    cap.map_or(images_in_flight, |c| c.min(images_in_flight))
        .max(1)
}

/// One mapping's slot, held by its image from joining the window to being done.
pub(super) type Slot = Option<OwnedSemaphorePermit>;

/// The slots of every capped mapping, by mapping index (a whole-registry mapping's
/// repositories share their mapping's).
#[derive(Default)]
pub(super) struct Caps {
    by_mapping: std::sync::Mutex<HashMap<usize, Arc<Semaphore>>>,
}

impl Caps {
    /// `items` in order, each once its mapping (`mapping`, capped at `limit`) has a free slot;
    /// with no cap, at once.
    pub(super) fn admit<'a, T: Send + 'a>(
        &self,
        mapping: usize,
        limit: Option<usize>,
        items: Vec<T>,
    ) -> BoxStream<'a, (T, Slot)> {
        let Some(limit) = limit else {
            return futures::stream::iter(items.into_iter().map(|w| (w, None))).boxed();
        };
        let semaphore = Arc::clone(
            self.by_mapping
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(mapping)
                .or_insert_with(|| Arc::new(Semaphore::new(limit.max(1)))),
        );
        futures::stream::iter(items)
            .then(move |w| {
                let semaphore = Arc::clone(&semaphore);
                // The semaphore is never closed: acquiring fails only if it were.
                async move { (w, semaphore.acquire_owned().await.ok()) }
            })
            .boxed()
    }
}
