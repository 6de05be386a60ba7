//! `cargo bench -p ccswitch-protocol --bench frame_reader`: frames/s of the cursor-based
//! `FrameReader` against the one it replaced (kept below: it drained each frame off the front
//! of its buffer, moving everything behind it, and copied the frame out), on 1 MB of reports
//! arriving in one read. Printed, never asserted: machines here are shared and noisy, so the
//! two alternate, round after round, and the medians are compared.

use std::hint::black_box;
use std::time::Instant;

use ccswitch_protocol::wire::{self, peek_header, FrameReader, Measure, Msg, WireError, HEADER_LEN};

const BATCH_BYTES: usize = 1 << 20;
const ROUNDS: usize = 7;

/// The FrameReader before it became cursor-based.
#[derive(Default)]
struct DrainingFrameReader {
    buf: Vec<u8>,
    broken: Option<WireError>,
}

impl DrainingFrameReader {
    fn push(&mut self, bytes: &[u8]) {
        if self.broken.is_none() {
            self.buf.extend_from_slice(bytes);
        }
    }

    fn next_frame(&mut self) -> Result<Option<Vec<u8>>, WireError> {
        if let Some(e) = &self.broken {
            return Err(e.clone());
        }
        if self.buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let hdr = match peek_header(&self.buf) {
            Ok(hdr) => hdr,
            Err(e) => {
                self.buf.clear();
                self.broken = Some(e.clone());
                return Err(e);
            }
        };
        if self.buf.len() < hdr.len {
            return Ok(None);
        }
        Ok(Some(self.buf.drain(..hdr.len).collect()))
    }
}

/// Back-to-back reports of the standard program (9 fields, 88 bytes each), about 1 MB.
fn batch() -> Vec<u8> {
    let mut out = Vec::with_capacity(BATCH_BYTES + 128);
    let mut sid = 0;
    while out.len() < BATCH_BYTES {
        let m = Msg::Measure(Measure { sid, program_uid: 1, fields: vec![u64::from(sid); 9] });
        m.encode_into(&mut out).unwrap();
        sid += 1;
    }
    out
}

/// Seconds to split `bytes` into frames, and how many; `decode` also decodes each one.
fn old(bytes: &[u8], decode: bool) -> (f64, usize) {
    let t = Instant::now();
    let mut reader = DrainingFrameReader::default();
    reader.push(bytes);
    let mut n = 0;
    while let Some(frame) = reader.next_frame().unwrap() {
        if decode {
            black_box(wire::decode(&frame).unwrap());
        }
        black_box(&frame);
        n += 1;
    }
    (t.elapsed().as_secs_f64(), n)
}

fn new(bytes: &[u8], decode: bool) -> f64 {
    let t = Instant::now();
    let mut reader = FrameReader::new();
    reader.push(bytes);
    while let Some(frame) = reader.next_frame().unwrap() {
        if decode {
            black_box(wire::decode(frame).unwrap());
        }
        black_box(frame);
    }
    t.elapsed().as_secs_f64()
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let bytes = batch();
    let (_, frames) = old(&bytes, false);
    println!("{frames} frames, {} bytes in one read; median of {ROUNDS} alternated rounds", bytes.len());
    println!("{:<28} {:>14} {:>14} {:>10}", "", "old frames/s", "new frames/s", "new/old");
    for decode in [false, true] {
        let (mut o, mut n) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            o.push(old(&bytes, decode).0);
            n.push(new(&bytes, decode));
        }
        let (o, n) = (frames as f64 / median(o), frames as f64 / median(n));
        let what = if decode { "split + decode" } else { "split" };
        println!("{what:<28} {o:>14.0} {n:>14.0} {:>9.1}x", n / o);
    }
}
