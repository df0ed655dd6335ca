// Backend::sample_rows on CUDA against the host Sampler with the same settings and uniforms.
// Skips when the build has no CUDA backend or no GPU is present.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "sample/philox.h"
#include "sample/sampler.h"
#include "spec/verifier.h"
#include "test_util.h"

namespace specd {
namespace {

using backend_test::HostTensor;

struct Setting {
  double temperature;
  int top_k;
  double top_p;
  double min_p;
};

class CudaSampling : public backend_test::CudaTest {
 protected:
  // The device's token of each row of `logits` for `setting`, with row r's uniform from
  // (seed, r).
  std::vector<int32_t> device_tokens(const HostTensor& logits, const Setting& s, uint64_t seed) {
    const int64_t rows = logits.t().rows;
    std::vector<RowSampling> settings(rows);
    for (int64_t r = 0; r < rows; ++r) {
      settings[r] = {s.temperature, s.top_k, s.top_p, s.min_p,
                     random_uniform(seed, r, RandomPurpose::kSample)};
    }
    HostTensor ids(DType::kI32, 1, rows);
    Tensor dlogits = upload(logits), dids = upload(ids);
    EXPECT_TRUE(backend_->sample_rows(dlogits, settings, dids, nullptr));
    HostTensor got = download(dids, ids);
    return {got.i32(), got.i32() + rows};
  }
  void expect_host_draws(int vocab, const std::vector<Setting>& settings);
};

// Rows with distinct values, heavy ties (logits rounded to a few levels), and peaked rows.
HostTensor test_logits(int rows, int vocab) {
  HostTensor logits = HostTensor(DType::kF32, rows, vocab).random(71, -6.0f, 6.0f);
  for (int r = 0; r < rows; ++r) {
    float* row = logits.t().row<float>(r);
    for (int c = 0; c < vocab; ++c) {
      if (r % 3 == 1) row[c] = std::round(row[c]);    // 13 levels: ties at every cut
      if (r % 3 == 2 && c % 97 == 0) row[c] += 9.0f;  // a few dominant tokens
    }
  }
  return logits;
}

// Each device token equals the host's draw, or (rounding of the cumulative sums in another
// order) the host's cumulative mass before and after the device token brackets the target
// within 1e-6 of the total. Boundary cases must stay rare. No top_p here lands exactly on a
// boundary of tied tokens (0.5 of an even count of equal weights): there the device's exact
// sums and the host's float probabilities may keep one tied token more or less.
TEST_F(CudaSampling, MatchesHostSampler) {
  expect_host_draws(5003, {{1.0, 0, 1.0, 0.0},
                           {0.7, 40, 1.0, 0.0},
                           {1.3, 0, 0.9, 0.0},
                           {0.8, 0, 1.0, 0.05},
                           {1.0, 50, 0.8, 0.02},
                           {0.5, 1, 1.0, 0.0},
                           {1.0, 0, 0.3, 0.0},
                           {2.0, 0, 0.95, 0.0},
                           {0.0, 0, 1.0, 0.0},
                           {1.0, 7, 0.4321, 0.1}});
}

// Rows of more than 8,192 columns with a temperature only are drawn over many blocks. (With
// filters, one block a row, as above; a top-p cut among thousands of tied weights would keep
// other tied tokens than the host's float sums.)
TEST_F(CudaSampling, SlicedRowsMatchHostSampler) {
  expect_host_draws(40000, {{1.0, 0, 1.0, 0.0}, {0.6, 0, 1.0, 0.0}, {1.7, 0, 1.0, 0.0}});
}

void CudaSampling::expect_host_draws(int vocab, const std::vector<Setting>& settings) {
  const int rows = 24;
  const HostTensor logits = test_logits(rows, vocab);
  Sampler sampler(vocab);
  std::vector<float> probs(vocab);
  int exact = 0, total = 0;
  for (size_t s = 0; s < settings.size(); ++s) {
    const Setting& set = settings[s];
    SamplingParams params;
    params.temperature = set.temperature;
    params.top_k = set.top_k;
    params.top_p = set.top_p;
    params.min_p = set.min_p;
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      const std::vector<int32_t> got = device_tokens(logits, set, seed * 1000 + s);
      for (int r = 0; r < rows; ++r) {
        std::span<const float> row(logits.t().row<const float>(r), vocab);
        const double u = random_uniform(seed * 1000 + s, r, RandomPurpose::kSample);
        int want;
        if (params.greedy()) {
          want = Sampler::argmax(row);
        } else {
          sampler.distribution(row, params, probs);
          want = Sampler::sample_from(probs, u);
        }
        ++total;
        if (got[r] == want) {
          ++exact;
          continue;
        }
        ASSERT_FALSE(params.greedy()) << "greedy row " << r << ": " << got[r] << " vs " << want;
        ASSERT_TRUE(got[r] >= 0 && got[r] < vocab) << got[r];
        double mass = 0, before = 0;
        for (int c = 0; c < vocab; ++c) {
          if (c == got[r]) before = mass;
          mass += probs[c];
        }
        const double after = before + probs[got[r]], target = u * mass;
        EXPECT_GT(probs[got[r]], 0.0f) << "setting " << s << " row " << r;
        EXPECT_TRUE(before - 1e-6 * mass <= target && target < after + 1e-6 * mass)
            << "setting " << s << " seed " << seed << " row " << r << ": device " << got[r]
            << ", host " << want;
      }
    }
  }
  EXPECT_GE(exact, total * 99 / 100) << exact << " of " << total << " identical";
}

TEST_F(CudaSampling, RowWithoutFiniteLogitGivesMinusOne) {
  for (int vocab : {300, 20000}) {
    HostTensor logits(DType::kF32, 2, vocab);
    for (int c = 0; c < vocab; ++c) {
      logits.t().row<float>(0)[c] = -INFINITY;
      logits.t().row<float>(1)[c] = c == 17 || c == vocab - 3 ? 0.0f : -INFINITY;
    }
    for (const Setting& set : {Setting{0.9, 0, 0.9, 0.0}, Setting{0.9, 0, 1.0, 0.0}}) {
      const std::vector<int32_t> got = device_tokens(logits, set, 5);
      EXPECT_EQ(got[0], -1) << vocab;
      EXPECT_TRUE(got[1] == 17 || got[1] == vocab - 3) << vocab << ": " << got[1];
    }
  }
}

// Rows of different lengths on one backend (a draft and a target with padded vocabularies): the
// sliced path's scratch is laid out per length, its tickets must stay where they are.
TEST_F(CudaSampling, RowLengthsChangingBetweenCallsKeepTheirTokens) {
  const Setting set{0.9, 0, 1.0, 0.0};
  const HostTensor wide = test_logits(5, 40000), narrow = test_logits(5, 20000);
  const std::vector<int32_t> wide_tokens = device_tokens(wide, set, 3);
  const std::vector<int32_t> narrow_tokens = device_tokens(narrow, set, 3);
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(device_tokens(wide, set, 3), wide_tokens) << round;
    EXPECT_EQ(device_tokens(narrow, set, 3), narrow_tokens) << round;
  }
  backend_ = make_backend(Device{DeviceKind::kCuda, 0}, 1);  // fresh: the narrow rows first
  EXPECT_EQ(device_tokens(narrow, set, 3), narrow_tokens);
  EXPECT_EQ(device_tokens(wide, set, 3), wide_tokens);
}

// Rows of one call with different settings (some drawn over many blocks, some by one block a
// row): each row's token is the one it gets alone.
TEST_F(CudaSampling, MixedSettingsInOneCallAreIndependent) {
  const int rows = 12, vocab = 30000;
  const HostTensor logits = test_logits(rows, vocab);
  const Setting kinds[] = {{0.8, 0, 1.0, 0.0}, {1.0, 0, 0.9, 0.0}, {0.0, 0, 1.0, 0.0}};
  std::vector<RowSampling> settings(rows);
  for (int r = 0; r < rows; ++r) {
    const Setting& k = kinds[r % 3];
    settings[r] = {k.temperature, k.top_k, k.top_p, k.min_p,
                   random_uniform(7, r, RandomPurpose::kSample)};
  }
  HostTensor ids(DType::kI32, 1, rows);
  Tensor dlogits = upload(logits), dids = upload(ids);
  ASSERT_TRUE(backend_->sample_rows(dlogits, settings, dids, nullptr));
  HostTensor all = download(dids, ids);
  for (int r = 0; r < rows; ++r) {
    HostTensor one(DType::kF32, 1, vocab), id(DType::kI32, 1, 1);
    std::copy_n(logits.t().row<const float>(r), vocab, one.t().row<float>(0));
    Tensor done = upload(one), did = upload(id);
    ASSERT_TRUE(backend_->sample_rows(done, {&settings[r], 1}, did, nullptr));
    EXPECT_EQ(download(did, id).i32()[0], all.i32()[r]) << "row " << r;
  }
}

// Many rows (more than one launch's 16) with the same seed and settings: the same tokens as
// each row sampled in a batch of its own, run after run.
TEST_F(CudaSampling, RowsAreIndependentAndRepeatable) {
  const int rows = 37, vocab = 2048;
  const HostTensor logits = test_logits(rows, vocab);
  const Setting set{0.9, 0, 0.9, 0.0};
  const std::vector<int32_t> all = device_tokens(logits, set, 99);
  EXPECT_EQ(device_tokens(logits, set, 99), all);
  for (int r = 0; r < rows; r += 6) {
    HostTensor one(DType::kF32, 1, vocab);
    std::copy_n(logits.t().row<const float>(r), vocab, one.t().row<float>(0));
    std::vector<RowSampling> setting = {{set.temperature, set.top_k, set.top_p, set.min_p,
                                         random_uniform(99, r, RandomPurpose::kSample)}};
    HostTensor ids(DType::kI32, 1, 1);
    Tensor dlogits = upload(one), dids = upload(ids);
    ASSERT_TRUE(backend_->sample_rows(dlogits, setting, dids, nullptr));
    EXPECT_EQ(download(dids, ids).i32()[0], all[r]) << "row " << r;
  }
}

// Speculative sampling on the device against Verifier::verify on the host: the same emitted
// tokens for the same uniforms, for drafts near the target (mostly accepted) and far from it
// (rejections and residual draws), with and without filters.
TEST_F(CudaSampling, VerifySampledMatchesHostVerifier) {
  const int vocab = 3001, k = 4;
  const Setting settings[] = {{1.0, 0, 1.0, 0.0}, {0.8, 0, 0.9, 0.0}, {1.2, 30, 1.0, 0.05}};
  Sampler sampler(vocab);
  Verifier verifier(vocab);
  TokenHistory prompt(vocab), output(vocab);
  int same = 0, trials = 0, rejected = 0;
  std::string differences;
  for (size_t s = 0; s < std::size(settings); ++s) {
    SamplingParams params;
    params.temperature = settings[s].temperature;
    params.top_k = settings[s].top_k;
    params.top_p = settings[s].top_p;
    params.min_p = settings[s].min_p;
    for (int trial = 0; trial < 40; ++trial) {
      params.seed = 1000 * s + trial;
      const bool far = trial % 2 == 1;
      const HostTensor target =
          HostTensor(DType::kF32, k + 1, vocab).random(300 + trial, -4.0f, 4.0f);
      // The draft: the target's logits plus noise (near), or unrelated logits (far).
      HostTensor draft_logits = HostTensor(DType::kF32, k, vocab).random(500 + trial, -4.0f, 4.0f);
      for (int i = 0; !far && i < k; ++i) {
        for (int c = 0; c < vocab; ++c) {
          draft_logits.t().row<float>(i)[c] =
              target.t().row<const float>(i)[c] + 0.3f * draft_logits.t().row<float>(i)[c];
        }
      }
      DraftProposal proposal;
      proposal.sampled = true;
      proposal.probs.assign(static_cast<size_t>(k) * vocab, 0.0f);
      HostTensor q(DType::kF32, k, vocab);
      const int64_t position = 40;
      for (int i = 0; i < k; ++i) {
        std::span<float> qi(proposal.probs.data() + static_cast<size_t>(i) * vocab, vocab);
        sampler.distribution({draft_logits.t().row<const float>(i), static_cast<size_t>(vocab)},
                             params, qi);
        std::copy(qi.begin(), qi.end(), q.t().row<float>(i));
        proposal.tokens.push_back(Sampler::sample_from(
            qi, random_uniform(params.seed, position + i, RandomPurpose::kDraft)));
      }
      VerifyResult want;
      output.clear();
      verifier.verify(target.t().ptr<const float>(), proposal, params, position, prompt, output,
                      want);

      std::vector<double> u_accept(k), u_resample(k);
      for (int i = 0; i < k; ++i) {
        u_accept[i] = random_uniform(params.seed, position + i, RandomPurpose::kAccept);
        u_resample[i] = random_uniform(params.seed, position + i, RandomPurpose::kResample);
      }
      const RowSampling last{params.temperature, params.top_k, params.top_p, params.min_p,
                             random_uniform(params.seed, position + k, RandomPurpose::kSample)};
      Tensor dq = upload(q);
      const SampledDraft draft{.k = k,
                               .tokens = proposal.tokens,
                               .q = &dq,
                               .u_accept = u_accept,
                               .u_resample = u_resample};
      HostTensor ids(DType::kI32, 1, k + 1);
      Tensor dtarget = upload(target), dids = upload(ids);
      ASSERT_TRUE(backend_->verify_sampled(dtarget, last, draft, dids));
      HostTensor got_ids = download(dids, ids);
      // The same draft tokens read on the device give the same ids.
      HostTensor tokens(DType::kI32, 1, k);
      std::copy(proposal.tokens.begin(), proposal.tokens.end(), tokens.i32());
      Tensor dtokens = upload(tokens), dids_from_device = upload(ids);
      SampledDraft on_device = draft;
      on_device.tokens = {};
      on_device.device_tokens = dtokens.ptr<const int32_t>();
      ASSERT_TRUE(backend_->verify_sampled(dtarget, last, on_device, dids_from_device));
      HostTensor ids_from_device = download(dids_from_device, ids);
      EXPECT_TRUE(std::equal(got_ids.i32(), got_ids.i32() + k + 1, ids_from_device.i32()));
      VerifyResult got;
      output.clear();
      Verifier::verify_tokens(got_ids.i32(), proposal, output, got);
      ++trials;
      rejected += want.accepted < k ? 1 : 0;
      if (got.emitted == want.emitted) {
        ++same;
      } else {
        differences += " (setting " + std::to_string(s) + ", trial " + std::to_string(trial) +
                       ": accepted " + std::to_string(got.accepted) + " vs " +
                       std::to_string(want.accepted) + ")";
      }
    }
  }
  EXPECT_GT(rejected, trials / 4) << "the far drafts must exercise rejections";
  // One difference at most: a draw within rounding of a boundary (sums in another order).
  EXPECT_GE(same, trials - 1) << differences;
}

}  // namespace
}  // namespace specd
