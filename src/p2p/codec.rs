//! The sync protocol's stream codec: a request or response is its bytes, closed by the
//! end of the stream. A response is checked while it streams in: its kind (first 4
//! bytes) sets its size limit and a tips response's count is checked before anything
//! else is read, so an answer over a limit is refused after at most the limit's bytes and
//! blamed on its sender (`InvalidData`). Every byte read is reserved from the node's
//! memory budget first; when the budget is spent the read stops (`OutOfMemory`: nobody is
//! blamed, the fetch is retried later), so however many peers answer at once, what they
//! make us hold is bounded.

use super::wire::{response_limit, tips_count, MAX_REQUEST_BYTES, MAX_TIPS};
use crate::budget::{Held, MemoryBudget};
use futures::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use libp2p::request_response;
use libp2p::StreamProtocol;
use std::io::{Error, ErrorKind};
use std::sync::Arc;

/// Bytes read (and reserved) at a time.
const CHUNK: usize = 64 * 1024;

/// An inbound request as the codec read it: its bytes, or why it was refused (over the
/// request limit), to be blamed on the peer it came from. Outbound requests are bytes.
#[derive(Clone, Debug)]
pub enum SyncRequest {
    Bytes(Vec<u8>),
    Refused(String),
}

#[derive(Clone)]
pub struct BytesCodec {
    budget: Arc<MemoryBudget>,
}

impl BytesCodec {
    pub fn new(budget: Arc<MemoryBudget>) -> BytesCodec {
        BytesCodec { budget }
    }
}

/// Whether a failed read proves the sender wrong (as opposed to a dropped connection or
/// our own budget).
pub fn blames_sender(error: &Error) -> bool {
    error.kind() == ErrorKind::InvalidData
}

fn invalid(message: String) -> Error {
    Error::new(ErrorKind::InvalidData, message)
}

/// Reads a whole request: at most `MAX_REQUEST_BYTES`, counted against the budget.
async fn read_request<T: AsyncRead + Unpin + Send>(budget: &Arc<MemoryBudget>, io: &mut T) -> std::io::Result<Vec<u8>> {
    let _reserved = budget
        .try_reserve(MAX_REQUEST_BYTES + 1)
        .ok_or_else(|| Error::new(ErrorKind::OutOfMemory, "the node's memory budget is spent"))?;
    let mut bytes = Vec::new();
    io.take(MAX_REQUEST_BYTES + 1).read_to_end(&mut bytes).await?;
    if bytes.len() as u64 > MAX_REQUEST_BYTES {
        return Err(invalid(format!("request over {MAX_REQUEST_BYTES} bytes")));
    }
    Ok(bytes)
}

/// Reads a response, refusing it by its kind's limit and, for tips, by its count, while
/// it streams; each chunk is reserved before it is read.
async fn read_response<T: AsyncRead + Unpin + Send>(budget: &Arc<MemoryBudget>, io: &mut T) -> std::io::Result<Held> {
    let spent = || Error::new(ErrorKind::OutOfMemory, "the node's memory budget is spent");
    let mut reservation = budget.try_reserve(CHUNK as u64).ok_or_else(spent)?;
    let mut bytes = vec![0u8; 12];
    // Fewer than 12 bytes: the stream ended early (UnexpectedEof), which blames nobody.
    io.read_exact(&mut bytes).await?;
    let kind: [u8; 4] = bytes[..4].try_into().expect("12 bytes read");
    let (what, limit) = response_limit(kind).ok_or_else(|| invalid(format!("unknown response kind {kind:?}")))?;
    if let Some(count) = tips_count(&bytes) {
        if count > MAX_TIPS as u64 {
            return Err(invalid(format!("tips response lists {count} tips, more than {MAX_TIPS}")));
        }
    }
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let n = io.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        if (bytes.len() + n) as u64 > limit {
            return Err(invalid(format!("{what} over {limit} bytes")));
        }
        let needed = (bytes.len() + n) as u64;
        if needed > reservation.bytes() && !reservation.grow((needed - reservation.bytes()).max(CHUNK as u64)) {
            return Err(spent());
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
    Ok(Held::new(bytes, reservation))
}

/// A message is its bytes, closed by the end of the stream (tests' hostile peers frame
/// theirs with this too, so they differ from us only in what they send).
pub async fn write_closed<T: futures::AsyncWrite + Unpin + Send>(io: &mut T, bytes: &[u8]) -> std::io::Result<()> {
    io.write_all(bytes).await?;
    io.close().await
}

#[async_trait::async_trait]
impl request_response::Codec for BytesCodec {
    type Protocol = StreamProtocol;
    type Request = SyncRequest;
    type Response = Held;

    async fn read_request<T: AsyncRead + Unpin + Send>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
    ) -> std::io::Result<SyncRequest> {
        match read_request(&self.budget, io).await {
            Ok(bytes) => Ok(SyncRequest::Bytes(bytes)),
            Err(error) if blames_sender(&error) => Ok(SyncRequest::Refused(error.to_string())),
            Err(error) => Err(error),
        }
    }

    async fn read_response<T: AsyncRead + Unpin + Send>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
    ) -> std::io::Result<Held> {
        read_response(&self.budget, io).await
    }

    async fn write_request<T: futures::AsyncWrite + Unpin + Send>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
        request: SyncRequest,
    ) -> std::io::Result<()> {
        match request {
            SyncRequest::Bytes(bytes) => write_closed(io, &bytes).await,
            SyncRequest::Refused(_) => Err(Error::new(ErrorKind::InvalidInput, "a refused request is never sent")),
        }
    }

    async fn write_response<T: futures::AsyncWrite + Unpin + Send>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
        response: Held,
    ) -> std::io::Result<()> {
        write_closed(io, &response.bytes).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::p2p::wire::{encode_response, Response, SignedHeader};

    fn read(budget: &Arc<MemoryBudget>, bytes: &[u8]) -> std::io::Result<Held> {
        futures::executor::block_on(read_response(budget, &mut futures::io::Cursor::new(bytes.to_vec())))
    }

    #[test]
    fn responses_are_refused_while_they_stream_and_reserved_while_held() {
        let budget = MemoryBudget::new(8 * 1024 * 1024);
        let good = encode_response(&Response::Blocks(vec![vec![7; 300_000]])).unwrap();
        let held = read(&budget, &good).unwrap();
        assert_eq!(held.bytes, good);
        assert!(budget.used() >= good.len() as u64, "held bytes are reserved");
        drop(held);
        assert_eq!(budget.used(), 0, "and returned when dropped");

        // A tips response claiming more than MAX_TIPS: refused from its first 12 bytes.
        let mut many = 0u32.to_le_bytes().to_vec();
        many.extend_from_slice(&(MAX_TIPS as u64 + 1).to_le_bytes());
        let error = read(&budget, &many).unwrap_err();
        assert!(blames_sender(&error), "{error}");
        // A tips response longer than MAX_TIPS headers could be: refused at the limit.
        let mut long = encode_response(&Response::Tips(Vec::<SignedHeader>::new())).unwrap();
        long.resize(crate::p2p::wire::MAX_TIPS_RESPONSE_BYTES as usize + 1, 0);
        assert!(blames_sender(&read(&budget, &long).unwrap_err()));
        // An unknown kind, blamed; a cut-off stream, not blamed.
        assert!(blames_sender(&read(&budget, &[9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap_err()));
        assert!(!blames_sender(&read(&budget, &[1, 0, 0]).unwrap_err()));
        // Over the budget: refused without blame, nothing left reserved.
        let small = MemoryBudget::new(200_000);
        let error = read(&small, &good).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::OutOfMemory);
        assert_eq!(small.used(), 0);
    }
}
