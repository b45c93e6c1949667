// Project stand-in: FlashInfer's cudaUtils.h includes <cublasLt.h> but the routing kernel uses nothing
// from it, and the oracle must build where the cuBLAS headers are not installed.
#pragma once
