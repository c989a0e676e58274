// pointwise_vec.hpp: the two-elements-a-thread pointwise loop, with the one-element loop as the
// fallback for buffers not aligned to a pair (gpu/codegen/pointwise_vec.py fills the ${...}
// slots; a list slot alone on its line takes lines at its indentation; see gpu/codegen/templates.py).
// @template kernel

MIGX_GLOBAL void ${name}_kernel(${params}) {
    migx::kernel_entry();
    const ${it} stride = (${it})gridDim.x * blockDim.x;
    if ((${check}) == 0) {
        for (${it} v = (${it})blockIdx.x * blockDim.x + threadIdx.x; v < ${pairs}; v += stride) {
            const ${it} i = v * 2;
            ${pair_body}
        }
    } else {
        for (${it} i = (${it})blockIdx.x * blockDim.x + threadIdx.x; i < ${n}; i += stride) {
            ${scalar_body}
        }
    }
}
