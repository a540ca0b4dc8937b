// The sum over one workgroup of 256 threads in two levels through workgroup memory: 16 threads add 16
// partial sums each, then every thread adds those 16. Two barriers instead of a tree's eight, and no subgroup
// feature needed. The including kernel declares WORKGROUP_SIZE = 256.
const LANES: u32 = 16u;  // WORKGROUP_SIZE == LANES * LANES
var<workgroup> partial: array<f32, WORKGROUP_SIZE>;
var<workgroup> partial16: array<f32, LANES>;

// The sum of `value` over the workgroup, returned to every thread. Call from uniform control flow. Calls may
// follow each other: a call's reads of `partial` end before its second barrier and its reads of `partial16`
// before the next call's first, which is before that call writes either.
fn workgroup_sum(lid: u32, value: f32) -> f32 {
  partial[lid] = value;
  workgroupBarrier();
  if (lid < LANES) {
    var sum: f32 = 0.0;
    for (var k: u32 = 0u; k < LANES; k++) {
      sum += partial[lid + k * LANES];  // consecutive threads read consecutive banks
    }
    partial16[lid] = sum;
  }
  workgroupBarrier();
  var total: f32 = 0.0;
  for (var k: u32 = 0u; k < LANES; k++) {
    total += partial16[k];  // the same address for every thread: a broadcast
  }
  return total;
}
