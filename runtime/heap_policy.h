// How the runtime's processes take memory from the system: one policy for training, calibration
// and the ring-attention bench (shardsim-runtime's main sets it for every command; the train
// command sets it too, for in-process callers), so that what calibrate measures runs under the
// allocator that training runs under.
#pragma once

namespace shardsim::runtime {

// Keeps freed memory in the process's heap for the next allocation, as a framework's caching
// allocator does (PyTorch's keeps its reserved blocks), instead of giving each large buffer back
// and faulting fresh zeroed pages in on every step. Allocations up to 32 MiB come from the heap,
// and the heap's top is given back only past 1 GiB free. The resident set's peak is then the
// heap's high-water mark: what the trainer held at its peak, with the allocator's slack.
// Measured on the validate suite's data plan (tiny-dense, data=2, 2 cores): 441.6 ms a step with
// every buffer over 256 KiB mapped on its own, 284.9 ms with this policy; the products that write
// [tokens, ffn] outputs (mlp_up, mlp_down_dgrad) lost 1.4 ms a call to page faults.
void UseCachingHeap();

}  // namespace shardsim::runtime
