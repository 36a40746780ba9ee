//! The one size bound for byte streams from outside (registry blob GETs, layout blob files):
//! a stream that yields more than its declared size fails at the first byte beyond it.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::Stream;

use crate::error::ErrorKind;
use crate::retry::Failure;

/// A stream of at most `declared` bytes. The chunk that would pass the bound is not yielded:
/// the stream yields one final error naming `what` and ends, so a source that streams without
/// end fills no buffer and no file beyond `declared` bytes.
pub struct Bounded<S> {
    inner: S,
    left: u64,
    declared: u64,
    what: String,
    done: bool,
}

/// Bounds `inner` to `declared` bytes; `what` names the stream in the error (`blob sha256:…
/// from registry x`).
pub fn bounded<S>(inner: S, declared: u64, what: impl Into<String>) -> Bounded<S> {
    Bounded {
        inner,
        left: declared,
        declared,
        what: what.into(),
        done: false,
    }
}

/// The error of a stream that went past its declared size.
pub fn overrun(what: &str, declared: u64) -> ErrorKind {
    ErrorKind::InvalidResponse(format!(
        "{what} sent more than its declared {declared} bytes: cut off"
    ))
}

impl<S> Stream for Bounded<S>
where
    S: Stream<Item = Result<Bytes, Failure>> + Unpin,
{
    type Item = Result<Bytes, Failure>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.inner).poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                let len = chunk.len() as u64;
                if len > self.left {
                    self.done = true;
                    let kind = overrun(&self.what, self.declared);
                    return Poll::Ready(Some(Err(Failure::Final(kind))));
                }
                self.left -= len;
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(None) => {
                self.done = true;
                Poll::Ready(None)
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn chunks(sizes: &[usize]) -> impl Stream<Item = Result<Bytes, Failure>> + Unpin {
        futures::stream::iter(
            sizes
                .iter()
                .map(|n| Ok(Bytes::from(vec![7u8; *n])))
                .collect::<Vec<_>>(),
        )
    }

    async fn collect(s: impl Stream<Item = Result<Bytes, Failure>> + Unpin) -> (u64, Vec<String>) {
        let items: Vec<_> = s.collect().await;
        let bytes = items
            .iter()
            .filter_map(|i| i.as_ref().ok())
            .map(|b| b.len() as u64)
            .sum();
        let errors = items
            .into_iter()
            .filter_map(Result::err)
            .map(|f| f.reason())
            .collect();
        (bytes, errors)
    }

    #[tokio::test]
    async fn a_stream_within_its_size_passes_whole() {
        assert_eq!(collect(bounded(chunks(&[3, 4]), 7, "b")).await, (7, vec![]));
        assert_eq!(collect(bounded(chunks(&[3]), 7, "b")).await, (3, vec![]));
        assert_eq!(collect(bounded(chunks(&[]), 0, "b")).await, (0, vec![]));
    }

    #[tokio::test]
    async fn the_first_byte_beyond_the_size_ends_the_stream_with_an_error() {
        let (bytes, errors) = collect(bounded(chunks(&[3, 4, 1, 100]), 7, "blob x")).await;
        assert_eq!(bytes, 7);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains("blob x") && errors[0].contains("7"),
            "{errors:?}"
        );
        let (bytes, errors) = collect(bounded(chunks(&[1]), 0, "empty")).await;
        assert_eq!((bytes, errors.len()), (0, 1));
    }

    #[tokio::test]
    async fn an_endless_stream_is_cut_at_its_size() {
        let endless = futures::stream::repeat_with(|| Ok(Bytes::from_static(&[0u8; 1024])));
        let (bytes, errors) = collect(bounded(endless, 10_000, "zero")).await;
        assert_eq!((bytes, errors.len()), (9 * 1024, 1));
    }
}
