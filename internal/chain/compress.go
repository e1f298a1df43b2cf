package chain

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// chunkLevel is the zstd level chunks are written with, chosen with
// BenchmarkChunkEncode on 8 MiB of orders-like rows (one core): SpeedFastest
// encodes about 20% faster (~205 vs ~172 MB/s) but writes 3.6% larger
// chunks (ratio 3.37 vs 3.49); SpeedBetterCompression is 40% slower for 3%
// smaller. Decoding runs near 790 MB/s whatever the level. The default level
// gives up a fifth of the encoding speed for chunks that every later
// transfer, read and stored byte benefits from.
const chunkLevel = zstd.SpeedDefault

// Encoders and the decoder are shared by the whole process: EncodeAll and
// DecodeAll are safe for concurrent use and keep their own pools of state,
// sized to GOMAXPROCS, so a chunk never pays for setting one up.
var (
	encoders    [zstd.SpeedBestCompression + 1]*zstd.Encoder
	encoderErr  [zstd.SpeedBestCompression + 1]error
	encoderOnce [zstd.SpeedBestCompression + 1]sync.Once

	decoder     *zstd.Decoder
	decoderErr  error
	decoderOnce sync.Once
)

// encoderAt returns the shared encoder for level.
func encoderAt(level zstd.EncoderLevel) (*zstd.Encoder, error) {
	if level < zstd.SpeedFastest || level > zstd.SpeedBestCompression {
		return nil, fmt.Errorf("zstd level %d out of range", level)
	}
	encoderOnce[level].Do(func() {
		encoders[level], encoderErr[level] = zstd.NewWriter(nil,
			zstd.WithEncoderLevel(level),
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithEncoderCRC(true))
	})
	return encoders[level], encoderErr[level]
}

// sharedDecoder returns the shared decoder. It refuses frames that would
// decode to more than MaxChunkRawSize bytes, and DecodeAll never writes past
// the capacity of the destination it is given, which DecodeChunk sizes to
// the header's raw size.
func sharedDecoder() (*zstd.Decoder, error) {
	decoderOnce.Do(func() {
		decoder, decoderErr = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(0),
			zstd.WithDecoderMaxMemory(MaxChunkRawSize),
			zstd.WithDecoderMaxWindow(MaxChunkRawSize),
			zstd.WithDecodeAllCapLimit(true))
	})
	return decoder, decoderErr
}
