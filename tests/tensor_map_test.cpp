// Tensor maps without a GPU: validate_tensor_map accepts what cuTensorMapEncodeTiled documents
// and refuses the rest with a message naming the argument, its value and what is allowed;
// encode_tensor_map validates before it touches the driver (a bad spec throws InvalidArgument
// even where there is no driver); the kernels' TensorMap (common/tma.cuh) has CUtensorMap's
// size and alignment.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "ktune/error.hpp"
#include "runtime/core/driver.hpp"
#include "runtime/core/tensor_map.hpp"
#include "templates/common/tma.cuh"

namespace ktune {
namespace {

// The encoded bytes are copied into a TensorMap for the kernel's argument struct. cuda.h aligns
// CUtensorMap to 64 bytes before CUDA 13 and to 128 from it on, so host mirrors of argument
// structs hold a TensorMap, whose 64 matches the device side on every toolkit.
static_assert(sizeof(tma::TensorMap) == sizeof(CUtensorMap), "TensorMap holds a CUtensorMap");
static_assert(alignof(tma::TensorMap) == 64, "the driver wants tensor maps 64-byte aligned");
static_assert(alignof(CUtensorMap) % alignof(tma::TensorMap) == 0, "CUtensorMap is aligned");

constexpr CUdeviceptr kAddress = 0x7f0000001000ull;

// A bf16 matrix of 100 x 200 with a 432-byte row pitch, tiles of 64 x 64: valid.
TensorMapSpec matrix(CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE) {
  return matrix_tensor_map(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, kAddress, 100, 200, 432, 64, 64,
                           swizzle);
}

// What validate_tensor_map says refusing `s`; empty when it accepts it.
std::string refusal(const TensorMapSpec& s) {
  try {
    validate_tensor_map(s);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return {};
}

// That validate_tensor_map refuses the spec `change` makes of matrix() with a message holding
// `words`.
void expect_refused(const std::function<void(TensorMapSpec&)>& change, const std::string& words) {
  TensorMapSpec s = matrix();
  change(s);
  const std::string message = refusal(s);
  EXPECT_NE(message.find(words), std::string::npos) << "message: \"" << message << "\"";
}

TEST(TensorMap, MatrixSpecIsTheDriversOrder) {
  const TensorMapSpec s = matrix(CU_TENSOR_MAP_SWIZZLE_128B);
  EXPECT_EQ(s.dims, (std::vector<std::uint64_t>{200, 100}));  // columns (contiguous), rows
  EXPECT_EQ(s.strides, (std::vector<std::uint64_t>{432}));
  EXPECT_EQ(s.box, (std::vector<std::uint32_t>{64, 64}));
  EXPECT_EQ(s.swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
  EXPECT_EQ(tensor_map_element_bytes(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16), 2u);
  EXPECT_EQ(tensor_map_element_bytes(CU_TENSOR_MAP_DATA_TYPE_FLOAT32), 4u);
  EXPECT_EQ(tensor_map_element_bytes(CU_TENSOR_MAP_DATA_TYPE_UINT8), 1u);
}

TEST(TensorMap, AcceptsWhatTheDriverDocuments) {
  EXPECT_NO_THROW(validate_tensor_map(matrix()));
  EXPECT_NO_THROW(validate_tensor_map(matrix(CU_TENSOR_MAP_SWIZZLE_128B)));
  // 1-D and 5-D, fp32, u8, explicit element strides, the largest box and stride.
  TensorMapSpec one;
  one.dtype = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  one.address = kAddress;
  one.dims = {1000};
  one.box = {256};
  EXPECT_NO_THROW(validate_tensor_map(one));
  TensorMapSpec five;
  five.dtype = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  five.address = kAddress;
  five.dims = {64, 7, 5, 3, 1ull << 32};
  five.strides = {64, 448, 2240, (1ull << 40) - 16};
  five.box = {16, 1, 2, 3, 4};
  five.element_strides = {1, 1, 2, 8, 1};
  EXPECT_NO_THROW(validate_tensor_map(five));
  // 32 bytes of fp16 in the 32-byte swizzle; the NaN fill for a float type.
  TensorMapSpec narrow = matrix_tensor_map(CU_TENSOR_MAP_DATA_TYPE_FLOAT16, kAddress, 10, 16, 32,
                                           8, 16, CU_TENSOR_MAP_SWIZZLE_32B);
  narrow.oob_fill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
  EXPECT_NO_THROW(validate_tensor_map(narrow));
}

TEST(TensorMap, RefusesEachBadArgumentByName) {
  expect_refused([](TensorMapSpec& s) { s.dims.clear(); }, "rank 0 (dims has that many");
  expect_refused([](TensorMapSpec& s) { s.dims.assign(6, 4); }, "rank 6");
  expect_refused([](TensorMapSpec& s) { s.dims[1] = 0; }, "dims[1] = 0 must be 1 to 2^32");
  expect_refused([](TensorMapSpec& s) { s.dims[0] = (1ull << 32) + 1; },
                 "dims[0] = 4294967297");
  expect_refused([](TensorMapSpec& s) { s.address = 0; }, "global address is null");
  expect_refused([](TensorMapSpec& s) { s.address += 8; },
                 "global address 0x7f0000001008 must be 16-byte aligned");
  expect_refused([](TensorMapSpec& s) { s.strides[0] = 400 + 8; },
                 "strides[0] = 408 (bytes between indices of dimension 1) must be a multiple "
                 "of 16 and below 2^40");
  expect_refused([](TensorMapSpec& s) { s.strides[0] = 1ull << 40; }, "strides[0] = 1099511627776");
  expect_refused([](TensorMapSpec& s) { s.strides.clear(); },
                 "strides has 0 entries; rank 2 needs 1");
  expect_refused([](TensorMapSpec& s) { s.box.push_back(1); }, "box has 3 entries; rank 2 needs 2");
  expect_refused([](TensorMapSpec& s) { s.box[1] = 0; }, "box[1] = 0 must be 1 to 256");
  expect_refused([](TensorMapSpec& s) { s.box[1] = 257; }, "box[1] = 257 must be 1 to 256");
  expect_refused([](TensorMapSpec& s) { s.box[0] = 12; },
                 "box[0] x 2 bytes (BFLOAT16) = 24 bytes must be a multiple of 16");
  expect_refused([](TensorMapSpec& s) { s.element_strides = {1, 9}; },
                 "element_strides[1] = 9 must be 1 to 8");
  expect_refused([](TensorMapSpec& s) { s.element_strides = {1}; },
                 "element_strides has 1 entries; rank 2 needs 2");
  expect_refused([](TensorMapSpec& s) { s.dtype = CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B; },
                 "is not supported (allowed: UINT8");
  expect_refused(
      [](TensorMapSpec& s) {
        s.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
        s.box[0] = 128;
      },
      "box[0] x 2 bytes = 256 bytes must be at most 128 with SWIZZLE_128B (the swizzle span)");
  expect_refused([](TensorMapSpec& s) { s.swizzle = CU_TENSOR_MAP_SWIZZLE_64B; },
                 "= 128 bytes must be at most 64 with SWIZZLE_64B");
  expect_refused([](TensorMapSpec& s) { s.swizzle = CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B; },
                 "swizzle 4 is not supported (allowed: SWIZZLE_NONE");
  expect_refused([](TensorMapSpec& s) { s.interleave = CU_TENSOR_MAP_INTERLEAVE_16B; },
                 "rank 2 must be 3 to 5 with an interleaved layout");
  expect_refused(
      [](TensorMapSpec& s) {
        s.dtype = CU_TENSOR_MAP_DATA_TYPE_INT32;
        s.oob_fill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
      },
      "needs a floating-point dtype, not INT32");
}

TEST(TensorMap, InterleaveRules) {
  TensorMapSpec s;
  s.dtype = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  s.address = kAddress + 16;  // 16-byte aligned, not 32
  s.dims = {16, 8, 4};
  s.strides = {32, 256};
  s.box = {16, 8, 4};
  s.interleave = CU_TENSOR_MAP_INTERLEAVE_32B;
  s.swizzle = CU_TENSOR_MAP_SWIZZLE_32B;
  EXPECT_NE(refusal(s).find("must be 32-byte aligned with INTERLEAVE_32B"), std::string::npos)
      << refusal(s);
  s.address = kAddress;
  EXPECT_NO_THROW(validate_tensor_map(s));
  s.strides = {48, 256};
  EXPECT_THROW(validate_tensor_map(s), InvalidArgument);  // a multiple of 16, not of 32
  s.strides = {32, 256};
  s.swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
  EXPECT_NE(refusal(s).find("SWIZZLE_NONE with INTERLEAVE_32B: only SWIZZLE_32B"),
            std::string::npos)
      << refusal(s);
}

TEST(TensorMap, EncodeValidatesBeforeTheDriver) {
  TensorMapSpec s = matrix();
  s.box[1] = 300;
  // InvalidArgument whether or not this machine has a driver: the driver is not reached.
  EXPECT_THROW(encode_tensor_map(s), InvalidArgument);
  if (!Driver::available()) {
    // A valid spec reaches the driver, and there is none.
    EXPECT_THROW(encode_tensor_map(matrix()), NoDevice);
  }
}

}  // namespace
}  // namespace ktune
