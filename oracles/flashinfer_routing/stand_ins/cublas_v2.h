// Project stand-in: FlashInfer's cudaUtils.h includes <cublas_v2.h> but the routing kernel uses nothing
// from it, and the oracle must build where the cuBLAS headers are not installed.
#pragma once
