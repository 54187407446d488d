// torch's int64 flat index (h * in_w + w, or (d * in_h + h) * in_w + w) of
// each selected tap, an output row at a time: the argmax_to_indices kernel
// converts every row, and the forward fast paths of planes convert each row
// right after writing its argmax, so that return_indices reads the input once
// and never reads the argmax back from memory. Rows are those of the pooled
// tensor as stored (a volume's depth-folded: geometry.h): out_w elements in
// NCHW, out_w * C in channels_last; row r pools window row r % (out_d * out_h).
#pragma once

#include <cstdint>
#include <vector>

#include "poolx/geometry.h"
#include "poolx/layout.h"

namespace poolx {

class IndexRows {
 public:
  // Whether the table serves: every window has an in-bounds tap, so that no
  // index needs the element functor's clamp; adaptive windows in channels_last.
  static bool applies(const Pool2dGeometry& g, bool channels_last);

  // Rows of `argmax` (1-byte, layout l) into `indices` (same layout).
  IndexRows(const uint8_t* argmax, int64_t* indices, const Layout4d& l, const Pool2dGeometry& g);

  int64_t rows() const { return rows_; }
  // Converts row r; returns the largest argmax value read (each value is a
  // table lookup, so a value past the taps costs a wrong index, never a
  // wrong access: the caller checks the maximum).
  uint8_t convert(int64_t r) const { return convert(r, 0, out_w_); }
  // The same for pixels [ow_begin, ow_end) of row r.
  uint8_t convert(int64_t r, int64_t ow_begin, int64_t ow_end) const;
  // For forward kernels that write each index straight from their argmax
  // lanes (isa/index_lanes.h): the offsets of the window's taps where up to
  // 16 fit int32, else null (the kernel converts rows then), and where row
  // r's window ow starts (row_start(r) + column_start(ow)).
  const int32_t* tap_offsets16() const { return fits16_ ? table16_ : nullptr; }
  // whether tap t of every window lies t elements after its start
  bool consecutive_taps() const { return consecutive_; }
  int64_t row_start(int64_t r) const { return row_start_[r % out_h_]; }
  int64_t column_start(int64_t ow) const { return column_start_[ow]; }
  int64_t* indices() const { return indices_; }
  bool streams() const { return stream_; }
  // Called by each thread after its last row: large outputs go by streaming
  // stores, which are weakly ordered, and the threads' join must publish them.
  void publish() const;

 private:
  bool steps_serve(const Pool2dGeometry& g);

  const uint8_t* argmax_;
  int64_t* indices_;
  int64_t rows_, row_len_, out_h_, out_w_, channels_;
  // window row od * out_h + oh starts at row_start_[od * out_h + oh] in the
  // volume (padding, negative), column ow at column_start_[ow] in it
  std::vector<int64_t> row_start_, column_start_;
  int64_t run_pixels_;
  std::vector<int64_t> pos_;  // element e's window start in a run of pixels
  int64_t tap_offset_[256];
  int32_t table16_[16] = {};  // the offsets of windows of up to 16 taps,
  bool fits16_;                // where they fit int32
  bool consecutive_;
  // Windows past 16 taps on AVX2 and wider: every tap's offset by TapOffsets
  // (tap_table.h), as row_mul, slice_mul, col_step, row_step, slice_step.
  int32_t tap_steps_[5] = {};
  // how the taps' offsets are found: by tap_offset_, a permute of table16_,
  // or tap_steps_
  enum class Offsets { kTable, kAvx512Permute, kAvx2Permute, kAvx2Steps } offsets_;
  bool stream_;  // streaming stores, for outputs past stream_min_bytes()
};

}  // namespace poolx
