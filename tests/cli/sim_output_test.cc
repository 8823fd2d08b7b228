// The outputs of `shardsim simulate` from hand-built SimReports: the Chrome trace's structure
// (metadata per process and thread, complete events in microseconds, flow pairs, collective
// arguments) and the report page (one rect.op per drawn event, self-contained, escaped).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "cli/sim_report_html.h"
#include "cli/sim_trace.h"
#include "cli/sim_view.h"
#include "core/inputs.h"
#include "strategies/build_step.h"

namespace shardsim::cli {
namespace {

using nlohmann::json;
using strategies::Stream;

// tiny-dense on 4 devices, tensor 2 x pipeline 2: two stages.
strategies::StepProgram TwoStageProgram() {
  PlanSpec plan;
  plan.mesh.tensor = 2;
  plan.mesh.pipeline = 2;
  plan.global_batch_size = 4;
  plan.seq_len = 64;
  return strategies::BuildStep(LoadModel("tiny-dense"), plan);
}

sim::TimelineEvent Compute(int64_t device, const std::string& key, const std::string& name,
                           double start_s, double end_s) {
  sim::TimelineEvent e;
  e.device = device;
  e.key = key;
  e.name = name;
  e.start_s = start_s;
  e.end_s = end_s;
  return e;
}

sim::TimelineEvent Comm(int64_t device, Stream stream, const std::string& key,
                        const std::string& name, double start_s, double end_s,
                        std::vector<int64_t> group) {
  sim::TimelineEvent e = Compute(device, key, name, start_s, end_s);
  e.stream = stream;
  e.is_comm = true;
  e.collective = stream == Stream::kPipeline ? CollectiveOp::kPermute : CollectiveOp::kAllReduce;
  e.axes = stream == Stream::kPipeline ? "pipeline" : "tensor";
  e.bytes = 1 << 20;
  e.group = std::move(group);
  e.uncontended_s = (end_s - start_s) / 2;
  return e;
}

// Stage 0 on rank 0 (standing for ranks 0 and 1) and stage 1 on ranks 2 and 3, unfolded there:
// per micro-batch a forward, a tensor all-reduce waited for and a send on stage 0; the receive
// (waiting for the input), a forward and a loss on stage 1. Times in milliseconds.
sim::SimReport TwoStageReport(int microbatches = 2) {
  sim::SimReport r;
  r.step.step_time_s = 0.02;
  r.step.compute_s = 0.012;
  r.step.bubble_s = 0.004;
  r.step.exposed_comm_s = {{"tensor all-reduce", 0.002}, {"pipeline permute", 0.001}};
  r.step.mfu = 0.41;
  r.step.mfu_palm = 0.43;
  r.step.hfu = 0.5;
  r.step.peak_flop_per_s = 989e12;
  r.step.hbm_bytes = 80e9;
  r.step.memory.peak.params = 10e9;
  r.step.memory.peak.activations = 20e9;
  r.step.critical_stage = 1;
  r.step.stage_time_s = {0.015, 0.018};
  r.devices = {{.rank = 0,
                .stage = 0,
                .represents = 2,
                .stream_busy_s = {0.01, 0.002, 0, 0.001, 0, 0},
                .compute_s = 0.01,
                .exposed_comm_s = 0.001,
                .bubble_s = 0.003,
                .overlapped_comm_s = 0.001,
                .memory_bytes = 30e9},
               {.rank = 2,
                .stage = 1,
                .stream_busy_s = {0.012},
                .compute_s = 0.012,
                .exposed_comm_s = 0.002,
                .bubble_s = 0.004,
                .memory_bytes = 31e9},
               {.rank = 3,
                .stage = 1,
                .stream_busy_s = {0.012},
                .compute_s = 0.012,
                .exposed_comm_s = 0.002,
                .bubble_s = 0.004,
                .memory_bytes = 31e9}};
  r.links = {{.link = 7,
              .name = "node0/nvlink/gpu0-up",
              .busy_s = 0.005,
              .utilisation = 0.25,
              .kinds = {"tensor all-reduce", "pipeline permute"}}};
  r.contention = {{.kind = "tensor all-reduce over tensor",
                   .simulated_s = 0.003,
                   .uncontended_s = 0.002,
                   .links = {"node0/nvlink/gpu0-up"},
                   .with = {"pipeline permute"}}};
  r.folded = {"stage 0: rank 0 stands for ranks 0-1 (tensor groups on disjoint links)"};
  r.simulated = {"stage 1: every device"};
  r.simulated_devices = 3;
  r.represented_devices = 4;
  r.microbatches_simulated = microbatches;
  r.microbatches = 4;
  for (int mb = 0; mb < microbatches; ++mb) {
    const double t = 0.004 * mb;
    const std::string m = std::to_string(mb);
    r.events.push_back(Compute(0, "0/0/qkv/" + m, "qkv", t, t + 0.001));
    r.events.push_back(Comm(0, Stream::kTensor, "0/0/tp_reduce_attention/" + m,
                            "tp_reduce_attention", t + 0.001, t + 0.0015, {0, 1}));
    r.events.push_back(Compute(0, "0/0/tp_reduce_attention/" + m, "wait tp_reduce_attention",
                               t + 0.001, t + 0.0015));
    sim::TimelineEvent send = Comm(0, Stream::kPipeline, "0/chunk0/pp_send_forward/" + m,
                                   "pp_send_forward", t + 0.0015, t + 0.002, {0, 2});
    send.flow_id = mb;
    send.flow_start = true;
    r.events.push_back(send);
    for (const int64_t rank : {2, 3}) {
      sim::TimelineEvent receive =
          Compute(rank, "1/chunk0/pp_recv_forward/" + m, "pp_recv_forward", t, t + 0.002);
      if (rank == 2) receive.flow_id = mb;
      r.events.push_back(receive);
      r.events.push_back(Compute(rank, "1/1/qkv/" + m, "qkv", t + 0.002, t + 0.003));
      r.events.push_back(Compute(rank, "1/L/loss/" + m, "loss", t + 0.003, t + 0.0035));
    }
  }
  r.timeline_end_s = 0.004 * microbatches;
  return r;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size()))
    ++n;
  return n;
}

// Set SHARDSIM_SIM_OUTPUT_DIR to keep the page and trace of TwoStageReport for a look.
void MaybeWrite(const std::string& name, const std::string& content) {
  const char* dir = std::getenv("SHARDSIM_SIM_OUTPUT_DIR");
  if (dir != nullptr) std::ofstream(std::string(dir) + "/" + name) << content;
}

TEST(SimTraceTest, OneProcessPerDeviceOneThreadPerStream) {
  const sim::SimReport report = TwoStageReport();
  const json trace = ChromeTrace(report, TwoStageProgram());
  MaybeWrite("trace.json", trace.dump());
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  std::map<int64_t, std::string> process_names;
  std::map<int64_t, int64_t> process_sort;
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names;
  std::map<std::pair<int64_t, int64_t>, int64_t> thread_sort;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] != "M") continue;
    const int64_t pid = e["pid"];
    if (e["name"] == "process_name") {
      EXPECT_TRUE(process_names.emplace(pid, e["args"]["name"]).second) << pid;
    }
    if (e["name"] == "process_sort_index") process_sort[pid] = e["args"]["sort_index"];
    if (e["name"] == "thread_name") {
      EXPECT_TRUE(
          thread_names.emplace(std::pair{pid, e["tid"].get<int64_t>()}, e["args"]["name"]).second);
    }
    if (e["name"] == "thread_sort_index")
      thread_sort[{pid, e["tid"].get<int64_t>()}] = e["args"]["sort_index"];
  }
  EXPECT_EQ(process_names,
            (std::map<int64_t, std::string>{{0, "rank 0 (stage 0), stands for 2 devices"},
                                            {2, "rank 2 (stage 1)"},
                                            {3, "rank 3 (stage 1)"}}));
  EXPECT_EQ(process_sort, (std::map<int64_t, int64_t>{{0, 0}, {2, 2}, {3, 3}}));
  // Rank 0 used compute, tensor and pipeline; ranks 2 and 3 compute only.
  const std::map<std::pair<int64_t, int64_t>, std::string> expected = {{{0, 0}, "compute"},
                                                                       {{0, 1}, "tensor"},
                                                                       {{0, 3}, "pipeline"},
                                                                       {{2, 0}, "compute"},
                                                                       {{3, 0}, "compute"}};
  EXPECT_EQ(thread_names, expected);
  for (const auto& [thread, name] : expected)
    EXPECT_EQ(thread_sort.at(thread), thread.second) << name;
  EXPECT_EQ(trace["shardsim"]["model"], "tiny-dense");
  EXPECT_DOUBLE_EQ(trace["shardsim"]["step_time_s"].get<double>(), 0.02);
  EXPECT_EQ(trace["shardsim"]["folded"], json(report.folded));
  EXPECT_EQ(trace["shardsim"]["drawn_devices"], json({0, 2}));
}

TEST(SimTraceTest, CompleteEventsInMicrosecondsWithCollectiveArgs) {
  const sim::SimReport report = TwoStageReport();
  const json trace = ChromeTrace(report, TwoStageProgram());
  std::vector<json> complete;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "X") complete.push_back(e);
  }
  ASSERT_EQ(complete.size(), report.events.size());
  for (size_t i = 0; i < complete.size(); ++i) {
    const json& x = complete[i];
    const sim::TimelineEvent& e = report.events[i];
    EXPECT_EQ(x["name"], e.key);
    EXPECT_EQ(x["pid"], e.device);
    EXPECT_EQ(x["tid"], static_cast<int>(e.stream));
    EXPECT_NEAR(x["ts"].get<double>(), e.start_s * 1e6, 1e-9);
    EXPECT_NEAR(x["dur"].get<double>(), (e.end_s - e.start_s) * 1e6, 1e-9);
    EXPECT_EQ(x["args"]["op"], e.name);
    EXPECT_EQ(x["cat"], EventCategory(e));
  }
  const json& qkv = complete[0];
  EXPECT_EQ(qkv["cat"], "compute");
  EXPECT_EQ(qkv["args"]["kind"], "matmul");
  EXPECT_FALSE(qkv["args"].contains("collective"));
  const json& reduce = complete[1];
  EXPECT_EQ(reduce["cat"], "collective");
  EXPECT_EQ(reduce["args"]["collective"], "all-reduce");
  EXPECT_EQ(reduce["args"]["bytes"], 1 << 20);
  EXPECT_EQ(reduce["args"]["group_size"], 2);
  EXPECT_EQ(reduce["args"]["group_ranks"], json({0, 1}));
  EXPECT_EQ(reduce["args"]["axes"], "tensor");
  EXPECT_NEAR(reduce["args"]["uncontended_us"].get<double>(), 250, 1e-9);
  EXPECT_EQ(complete[2]["cat"], "wait");
  EXPECT_EQ(complete[3]["cat"], "pipeline");
  EXPECT_EQ(complete[3]["args"]["collective"], "permute");
  EXPECT_EQ(complete[4]["cat"],
            "pipeline");  // the receive: the compute stream waiting for its input
  EXPECT_FALSE(complete[4]["args"].contains("collective"));
  EXPECT_EQ(complete[5]["cat"], "compute");
}

TEST(SimTraceTest, EachSendHasOneArrowToItsReceive) {
  const sim::SimReport report = TwoStageReport();
  const json trace = ChromeTrace(report, TwoStageProgram());
  std::map<int64_t, json> starts, finishes;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] != "s" && e["ph"] != "f") continue;
    EXPECT_TRUE((e["ph"] == "s" ? starts : finishes).emplace(e["id"].get<int64_t>(), e).second)
        << e.dump();
  }
  ASSERT_EQ(starts.size(), 2u);
  ASSERT_EQ(finishes.size(), 2u);
  for (const auto& [id, s] : starts) {
    const json& f = finishes.at(id);
    EXPECT_EQ(s["cat"], "pipeline");
    EXPECT_EQ(f["cat"], "pipeline");
    EXPECT_EQ(s["name"], f["name"]);
    EXPECT_EQ(f["bp"], "e");
    EXPECT_EQ(s["pid"], 0);
    EXPECT_EQ(s["tid"], static_cast<int>(Stream::kPipeline));
    EXPECT_EQ(f["pid"], 2);
    EXPECT_EQ(f["tid"], static_cast<int>(Stream::kCompute));
    // Each lies on its slice: the send's start and the receiving task's start.
    EXPECT_NEAR(s["ts"].get<double>(), (0.0015 + 0.004 * static_cast<double>(id)) * 1e6, 1e-6);
    EXPECT_NEAR(f["ts"].get<double>(), 0.004 * static_cast<double>(id) * 1e6, 1e-6);
  }
}

TEST(SimReportHtmlTest, OneRectPerEventOfTheDrawnDevices) {
  const sim::SimReport report = TwoStageReport();
  const std::string page = SimReportHtml(report, TwoStageProgram(), LoadCluster("dgx-h100:8"));
  MaybeWrite("page.html", page);
  EXPECT_EQ(DrawnDevices(report), (std::vector<int64_t>{0, 2}));
  size_t drawn = 0;
  for (const sim::TimelineEvent& e : report.events) drawn += e.device != 3 ? 1 : 0;
  EXPECT_EQ(Count(page, "<rect class=\"op "), drawn);
  // Coloured by stream; waits on communication and for pipeline inputs apart.
  EXPECT_EQ(Count(page, "<rect class=\"op k0\""), 6u);
  EXPECT_EQ(Count(page, "<rect class=\"op k1\""), 2u);
  EXPECT_EQ(Count(page, "<rect class=\"op k3\""), 2u);
  EXPECT_EQ(Count(page, "<rect class=\"op w\""), 2u);
  EXPECT_EQ(Count(page, "<rect class=\"op b\""), 2u);
  EXPECT_EQ(Count(page, "<svg"), Count(page, "</svg>"));
  EXPECT_NE(page.find("<title>shardsim simulate: tiny-dense on dgx-h100:8</title>"),
            std::string::npos);
  // Hover text: the key (with the op's name only where the key lacks it), duration and start.
  EXPECT_NE(page.find("<title>0/0/qkv/1: 1 ms at 4 ms</title>"), std::string::npos);
  EXPECT_NE(
      page.find(
          "<title>0/0/tp_reduce_attention/0 wait tp_reduce_attention: 500 us at 1 ms</title>"),
      std::string::npos);
  for (const char* text :
       {"41.0%", "989 TFLOP/s bf16", "node0/nvlink/gpu0-up", "25.0%", "tensor all-reduce", "2 of 4",
        "3 of 4 devices", "stands for ranks 0-1", "HBM"}) {
    EXPECT_NE(page.find(text), std::string::npos) << text;
  }
}

// Activation offloading's copies run on the host stream (strategies::Stream::kHost, the last):
// drawn on its own lane in its own colour.
TEST(SimReportHtmlTest, HostCopiesHaveTheirLane) {
  sim::SimReport report = TwoStageReport();
  sim::TimelineEvent copy = Comm(0, Stream::kHost, "0/0/offload/0", "offload", 0.001, 0.002, {0});
  copy.collective = CollectiveOp::kPermute;
  copy.axes = "";
  report.events.push_back(copy);
  const std::string page = SimReportHtml(report, TwoStageProgram(), LoadCluster("dgx-h100:8"));
  EXPECT_EQ(Count(page, "<rect class=\"op k6\""), 1u);
  EXPECT_NE(page.find(".k6{"), std::string::npos);
  EXPECT_EQ(Count(page, "<svg"), Count(page, "</svg>"));
}

TEST(SimReportHtmlTest, SelfContainedAndEscaped) {
  sim::SimReport report = TwoStageReport();
  report.events[0].key = "0/0/qkv<script>alert(1)</script>/0";
  report.contention[0].kind = "a & b \"quoted\"";
  const std::string page = SimReportHtml(report, TwoStageProgram(), LoadCluster("dgx-h100:8"));
  // Nothing to fetch (the only "http" is the policy's http-equiv, which forbids fetches).
  for (const char* reference :
       {"http:", "https:", "//", "src=", "href=", "url(", "@import", "<script", "<link"}) {
    EXPECT_EQ(page.find(reference), std::string::npos) << reference;
  }
  EXPECT_EQ(Count(page, "http"), 1u);
  EXPECT_NE(page.find("Content-Security-Policy\" content=\"default-src 'none'"), std::string::npos);
  EXPECT_NE(page.find("qkv&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(page.find("a &amp; b &quot;quoted&quot;"), std::string::npos);
}

// Tens of thousands of events are all drawn, in compact markup.
TEST(SimReportHtmlTest, ManyEventsStayCompact) {
  const sim::SimReport report = TwoStageReport(4000);
  const std::string page = SimReportHtml(report, TwoStageProgram(), LoadCluster("dgx-h100:8"));
  const size_t drawn = report.events.size() / 10 * 7;
  ASSERT_GT(drawn, 20000u);
  EXPECT_EQ(Count(page, "<rect class=\"op "), drawn);
  EXPECT_LT(page.size() / drawn, 160u);
}

}  // namespace
}  // namespace shardsim::cli
