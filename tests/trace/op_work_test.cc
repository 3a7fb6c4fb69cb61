// OperatorWork: the FLOPs of matrix products, convolutions and attention from record_shapes args,
// with the argument layouts PyTorch 2.11's profiler writes (the examples are taken from
// data/h200_heldout*/ *_shapes traces).
#include "emo/trace/op_work.h"

#include <gtest/gtest.h>

namespace emo::trace {
namespace {

using Dims = std::vector<std::vector<int64_t>>;
using Strings = std::vector<std::string>;

TEST(OperatorWorkTest, MatrixProducts) {
  // BERT's QKV projection: addmm(bias [3072], x [4096, 1024], w^T [1024, 3072]).
  const OpWork addmm = OperatorWork("aten::addmm", Dims{{3072}, {4096, 1024}, {1024, 3072}, {}, {}},
                                    Strings{"", "", "", "1", "1"},
                                    Strings{"c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"});
  EXPECT_DOUBLE_EQ(addmm.flops, 2.0 * 4096 * 1024 * 3072);
  EXPECT_EQ(addmm.precision, OpPrecision::k16Bit);
  const OpWork mm = OperatorWork("aten::mm", Dims{{32, 100}, {100, 512}}, Strings{"", ""}, Strings{"float", "float"});
  EXPECT_DOUBLE_EQ(mm.flops, 2.0 * 32 * 100 * 512);
  EXPECT_EQ(mm.precision, OpPrecision::kFp32);
  EXPECT_DOUBLE_EQ(OperatorWork("aten::bmm", Dims{{512, 64, 32}, {512, 32, 16}}, {}, {}).flops, 2.0 * 512 * 64 * 32 * 16);
  EXPECT_DOUBLE_EQ(OperatorWork("aten::baddbmm", Dims{{8, 4, 5}, {8, 4, 3}, {8, 3, 5}}, {}, {}).flops, 2.0 * 8 * 4 * 3 * 5);
  EXPECT_DOUBLE_EQ(OperatorWork("aten::_addmm_activation", Dims{{4096}, {4096, 1024}, {1024, 4096}}, {}, {}).flops,
                   2.0 * 4096 * 1024 * 4096);
}

TEST(OperatorWorkTest, CudnnRnn) {
  // data/h200_heldout2 lstm_lm: a 2-layer LSTM of 1024 units over [32, 64, 512] (batch first);
  // the weight list (a TensorList) has no sizes, the flat buffer 14,696,448 elements.
  const Dims fwd{{32, 64, 512}, {}, {}, {14696448}, {2, 32, 1024}, {2, 32, 1024}, {}, {}, {}, {}, {}, {}};
  const OpWork f = OperatorWork("aten::_cudnn_rnn", fwd, Strings{"", "", "4", "", "", "", "2", "1024", "0", "2", "True"},
                                Strings{"float", "TensorList", "Scalar", "float"});
  EXPECT_DOUBLE_EQ(f.flops, 2.0 * 32 * 64 * 14696448);
  EXPECT_EQ(f.precision, OpPrecision::kFp32);
  // A packed sequence: [tokens, input size].
  EXPECT_DOUBLE_EQ(OperatorWork("aten::_cudnn_rnn", Dims{{100, 8}, {}, {}, {1000}}, {}, {}).flops, 2.0 * 100 * 1000);
  // Backward: output_mask (argument 21) [input, hx, cx, weight]; with the weight gradient twice
  // the forward, without it once.
  Dims bwd(22);
  bwd[0] = {32, 64, 512};
  bwd[3] = {14696448};
  Strings c(22);
  c[21] = "[True, False, False, True]";
  EXPECT_DOUBLE_EQ(OperatorWork("aten::_cudnn_rnn_backward", bwd, c, {}).flops, 2.0 * f.flops);
  c[21] = "[True, False, False, False]";
  EXPECT_DOUBLE_EQ(OperatorWork("aten::_cudnn_rnn_backward", bwd, c, {}).flops, f.flops);
  // No flat buffer (weights not flattened): unknown.
  EXPECT_EQ(OperatorWork("aten::_cudnn_rnn", Dims{{32, 64, 512}, {}, {}, {}}, {}, {}).flops, 0.0);
  EXPECT_TRUE(HasOperatorWork("aten::_cudnn_rnn"));
  EXPECT_TRUE(HasOperatorWork("aten::_cudnn_rnn_backward"));
  EXPECT_FALSE(HasOperatorWork("aten::lstm"));  // its kernels carry _cudnn_rnn's External id
}

TEST(OperatorWorkTest, ShapesThatDoNotMultiplyGiveNoWork) {
  EXPECT_EQ(OperatorWork("aten::mm", Dims{{32, 100}, {99, 512}}, {}, {}).flops, 0.0);  // inner sizes differ
  EXPECT_EQ(OperatorWork("aten::mm", Dims{{32, 100}}, {}, {}).flops, 0.0);             // one input missing
  EXPECT_EQ(OperatorWork("aten::mm", Dims{{32, 0}, {0, 512}}, {}, {}).flops, 0.0);     // empty
  EXPECT_EQ(OperatorWork("aten::bmm", Dims{{64, 32}, {32, 16}}, {}, {}).flops, 0.0);   // not batched
  EXPECT_EQ(OperatorWork("aten::add", Dims{{32, 100}, {32, 100}}, {}, {}).flops, 0.0);  // not a product
  EXPECT_EQ(OperatorWork("aten::mm", {}, {}, {}).precision, OpPrecision::kUnknown);
}

TEST(OperatorWorkTest, ConvolutionForward) {
  // ResNet's stem: cudnn_convolution(input [32, 3, 128, 128], weight [64, 3, 7, 7], padding [3, 3],
  // stride [2, 2], dilation [1, 1], groups 1, ...): a 64 x 64 output.
  const double stem = 2.0 * 32 * 64 * 3 * (64 * 7) * (64 * 7);
  EXPECT_DOUBLE_EQ(OperatorWork("aten::cudnn_convolution", Dims{{32, 3, 128, 128}, {64, 3, 7, 7}},
                                Strings{"", "", "[3, 3]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"},
                                Strings{"float", "float"})
                       .flops,
                   stem);
  // The same through aten::convolution's layout (input, weight, bias, stride, padding, dilation,
  // transposed, output_padding, groups).
  EXPECT_DOUBLE_EQ(OperatorWork("aten::convolution", Dims{{32, 3, 128, 128}, {64, 3, 7, 7}, {}},
                                Strings{"", "", "", "[2, 2]", "[3, 3]", "[1, 1]", "False", "[0, 0]", "1"}, {})
                       .flops,
                   stem);
  // Transposed: not counted.
  EXPECT_EQ(OperatorWork("aten::convolution", Dims{{32, 3, 128, 128}, {64, 3, 7, 7}, {}},
                         Strings{"", "", "", "[2, 2]", "[3, 3]", "[1, 1]", "True", "[0, 0]", "1"}, {})
                .flops,
            0.0);
  // Depthwise (groups = channels): weight [C, 1, 3, 3], stride 1, padding 1.
  EXPECT_DOUBLE_EQ(OperatorWork("aten::cudnn_convolution", Dims{{8, 16, 10, 10}, {16, 1, 3, 3}},
                                Strings{"", "", "[1, 1]", "[1, 1]", "[1, 1]", "16"}, {})
                       .flops,
                   2.0 * 8 * 16 * 1 * (10 * 3) * (10 * 3));
  // Channels that do not match the weight: no work.
  EXPECT_EQ(OperatorWork("aten::cudnn_convolution", Dims{{8, 16, 10, 10}, {16, 4, 3, 3}},
                         Strings{"", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"}, {})
                .flops,
            0.0);
}

TEST(OperatorWorkTest, ConvolutionBackwardCountsTheGradientsAskedFor) {
  // (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding,
  // groups, output_mask), a 3x3 convolution keeping a 4x4 map.
  const Dims d{{32, 512, 4, 4}, {32, 512, 4, 4}, {512, 512, 3, 3}};
  const double forward = 2.0 * 32 * 512 * 512 * (4 * 3) * (4 * 3);
  auto backward = [&d](const char* mask) {
    return OperatorWork("aten::convolution_backward", d,
                        Strings{"", "", "", "[0]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", mask}, {})
        .flops;
  };
  EXPECT_DOUBLE_EQ(backward("[True, True, False]"), 2 * forward);
  EXPECT_DOUBLE_EQ(backward("[False, True, False]"), forward);
}

TEST(OperatorWorkTest, Attention) {
  // BERT: _cudnn_attention_forward(q, k, v [16, 16, 256, 64], ...).
  const Dims fwd{{16, 16, 256, 64}, {16, 16, 256, 64}, {16, 16, 256, 64}, {}, {}};
  const double f = 4.0 * 16 * 16 * 256 * 256 * 64;
  EXPECT_DOUBLE_EQ(OperatorWork("aten::_cudnn_attention_forward", fwd, {}, Strings{"c10::BFloat16"}).flops, f);
  // Backward: the output's gradient first, then q, k (keys of another length here).
  const Dims bwd{{16, 16, 256, 64}, {16, 16, 256, 64}, {16, 16, 128, 64}, {16, 16, 128, 64}};
  EXPECT_DOUBLE_EQ(OperatorWork("aten::_scaled_dot_product_flash_attention_backward", bwd, {}, {}).flops,
                   2.5 * 4.0 * 16 * 16 * 256 * 128 * 64);
  EXPECT_EQ(OperatorWork("aten::_cudnn_attention_forward", Dims{{16, 16, 256, 64}}, {}, {}).flops, 0.0);
}

TEST(OperatorWorkTest, TheOperatorsWhoseShapesTheReaderReads) {
  for (const char* name : {"aten::mm", "aten::addmm", "aten::_addmm_activation", "aten::bmm", "aten::baddbmm",
                           "aten::cudnn_convolution", "aten::convolution", "aten::_convolution",
                           "aten::convolution_backward", "aten::_cudnn_attention_forward",
                           "aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention_backward"}) {
    EXPECT_TRUE(HasOperatorWork(name)) << name;
  }
  for (const char* name : {"aten::add", "aten::mm_", "aten::matmul", "aten::linear", "aten::copy_", "aten::_to_copy",
                           "aten::", "mm", "flash_attn::attention", "aten::sum", "ProfilerStep#3"}) {
    EXPECT_FALSE(HasOperatorWork(name)) << name;
  }
}

}  // namespace
}  // namespace emo::trace
