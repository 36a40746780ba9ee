//! Byte streams held to a declared size: a source that sends more than it declared is cut off
//! at the first byte past the limit, so no stream fills a disk or a buffer without end.

use bytes::Bytes;
use futures::{Stream, StreamExt};

use crate::retry::Failure;

/// `stream`, ending with `excess()` as its last item as soon as more than `limit` bytes have
/// come: the bytes up to the limit pass on, the chunk that crosses it does not, and nothing is
/// read after it. A stream that stays within the limit passes unchanged (a shorter one too: the
/// digest check at its end is the judge of that).
pub fn limit<S, F>(stream: S, limit: u64, excess: F) -> impl Stream<Item = Result<Bytes, Failure>>
where
    S: Stream<Item = Result<Bytes, Failure>>,
    F: FnOnce() -> Failure,
{
    struct State<S, F> {
        stream: std::pin::Pin<Box<S>>,
        seen: u64,
        /// Taken when the limit is crossed: the stream then ends.
        excess: Option<F>,
    }
    let state = State {
        stream: Box::pin(stream),
        seen: 0,
        excess: Some(excess),
    };
    futures::stream::unfold(state, move |mut state| async move {
        state.excess.as_ref()?;
        let chunk = match state.stream.next().await? {
            Ok(chunk) => chunk,
            Err(f) => return Some((Err(f), state)),
        };
        state.seen = state.seen.saturating_add(chunk.len() as u64);
        if state.seen <= limit {
            return Some((Ok(chunk), state));
        }
        let excess = state.excess.take()?;
        Some((Err(excess()), state))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn chunks(sizes: &[usize]) -> impl Stream<Item = Result<Bytes, Failure>> {
        futures::stream::iter(
            sizes
                .iter()
                .map(|&n| Ok(Bytes::from(vec![7u8; n])))
                .collect::<Vec<_>>(),
        )
    }

    fn too_long() -> Failure {
        Failure::Final(ErrorKind::Local("too long".into()))
    }

    async fn collect(
        stream: impl Stream<Item = Result<Bytes, Failure>>,
    ) -> (u64, Vec<Result<(), String>>) {
        let items: Vec<_> = stream.collect().await;
        let bytes = items
            .iter()
            .filter_map(|i| i.as_ref().ok())
            .map(|b| b.len() as u64)
            .sum();
        let shape = items
            .into_iter()
            .map(|i| i.map(|_| ()).map_err(|f| format!("{f:?}")))
            .collect();
        (bytes, shape)
    }

    #[tokio::test]
    async fn a_stream_within_its_limit_passes_whole() {
        let (bytes, items) = collect(limit(chunks(&[4, 4, 2]), 10, too_long)).await;
        assert_eq!(bytes, 10);
        assert!(items.iter().all(Result::is_ok), "{items:?}");
        let (bytes, items) = collect(limit(chunks(&[3]), 10, too_long)).await;
        assert_eq!((bytes, items.len()), (3, 1));
    }

    #[tokio::test]
    async fn a_stream_past_its_limit_ends_with_the_error_and_reads_nothing_more() {
        let read = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = read.clone();
        // A source without end in practice, as /dev/zero is (finite here so that a broken
        // limiter fails the test instead of hanging it).
        let endless = futures::stream::repeat_with(move || {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(Bytes::from_static(&[0u8; 4]))
        })
        .take(1000);
        let (bytes, items) = collect(limit(endless, 10, too_long)).await;
        assert_eq!(bytes, 8, "the chunk crossing the limit is not passed on");
        assert_eq!(items.len(), 3);
        assert!(items[2].as_ref().unwrap_err().contains("too long"));
        assert_eq!(read.load(std::sync::atomic::Ordering::Relaxed), 3);
    }

    #[tokio::test]
    async fn the_limit_holds_at_zero_and_at_the_type_maximum() {
        let (bytes, items) = collect(limit(chunks(&[1]), 0, too_long)).await;
        assert_eq!((bytes, items.len()), (0, 1));
        assert!(items[0].is_err());
        let (bytes, items) = collect(limit(chunks(&[5, 5]), u64::MAX, too_long)).await;
        assert_eq!((bytes, items.len()), (10, 2));
    }
}
