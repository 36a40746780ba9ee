//! Runs one future per item through a window that refills as each finishes (never an ordered
//! queue, where one slow item stalls the window), and hands the results back in input order.

use std::future::Future;

use futures::StreamExt;

/// Runs `f` on every item, at most `limit` at once; a finished item's slot goes to the next
/// at once. Result `i` belongs to item `i`.
pub(crate) async fn in_window<I, F, Fut>(items: I, limit: usize, mut f: F) -> Vec<Fut::Output>
where
    I: IntoIterator,
    F: FnMut(I::Item) -> Fut,
    Fut: Future,
{
    let mut done: Vec<(usize, Fut::Output)> = futures::stream::iter(items.into_iter().enumerate())
        .map(|(i, item)| {
            let fut = f(item);
            async move { (i, fut.await) }
        })
        .buffer_unordered(limit.max(1))
        .collect()
        .await;
    done.sort_unstable_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, out)| out).collect()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// The floor: while the first item is slow, the other slot works through all the rest. An
    /// ordered `buffered(2)` queue counts a finished result it cannot yet hand out as in flight,
    /// so behind a slow first item it finishes one more and then stalls.
    #[tokio::test(start_paused = true)]
    async fn a_slow_item_does_not_stall_the_window_and_results_keep_input_order() {
        let finished = AtomicUsize::new(0);
        let finished_before_slow = AtomicUsize::new(usize::MAX);
        let out = in_window(0..10u64, 2, |i| {
            let finished = &finished;
            let finished_before_slow = &finished_before_slow;
            async move {
                let ms = if i == 0 { 1000 } else { 10 };
                tokio::time::sleep(Duration::from_millis(ms)).await;
                let n = finished.fetch_add(1, Ordering::SeqCst);
                if i == 0 {
                    finished_before_slow.store(n, Ordering::SeqCst);
                }
                i * 2
            }
        })
        .await;
        assert_eq!(out, (0..10).map(|i| i * 2).collect::<Vec<_>>());
        assert_eq!(
            finished_before_slow.load(Ordering::SeqCst),
            9,
            "the nine fast items all finished in the second slot while the slow one ran"
        );
    }
}
