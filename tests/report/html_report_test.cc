// The plan report page from hand-made plan JSON: what it draws, and the errors for a saved JSON
// it cannot draw (report/html_report.h). The page on a real plan, rendered: report_render_test.py.
#include "emo/report/html_report.h"

#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

namespace emo::report {
namespace {

using nlohmann::json;

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// One GPU, three ops (the last on the critical path), two packs: 345 MHz (the device's lowest)
// and 1980 MHz (its default).
json Plan(const std::string& trace = "t.json") {
  return {{"trace", trace},
          {"rank", -1},
          {"timeline", "traced"},
          {"steady_iteration", "ProfilerStep#3"},
          {"confidence", "high"},
          {"confidence_note", "no profiler overhead"},
          {"baseline", {{"time_us", 1000.0}, {"energy_j", 2.0}}},
          {"plan", {{"time_us", 1010.0}, {"energy_j", 1.5}, {"saving_pct", 25.0}, {"slowdown_pct", 1.0}, {"packs", 2},
                    {"switches", 2}}},
          {"static_best", {{"clock_mhz", 1500.0}, {"time_us", 1015.0}, {"energy_j", 1.7}, {"saving_pct", 15.0},
                           {"slowdown_pct", 1.5}}},
          {"report",
           {{"iteration_us", 1000.0},
            {"clocks_mhz", {{"min", 345.0}, {"default", 1980.0}}},
            {"gpus", json::array({{{"device", 0},
                                   {"end_us", 1000.0},
                                   {"ops", {{"start_us", {0.0, 300.0, 700.0}},
                                            {"dur_us", {100.0, 200.0, 250.0}},
                                            {"slack_us", {400.0, 50.0, 0.0}},
                                            {"pack", {0, 0, 1}},
                                            {"critical", {0, 0, 1}},
                                            {"class", {0, 1, 0}}}}}})},
            {"packs", json::array({{{"device", 0}, {"start_us", 0.0}, {"end_us", 600.0}, {"clock_mhz", 345.0}, {"ops", 2}},
                                   {{"device", 0}, {"start_us", 600.0}, {"end_us", 1000.0}, {"clock_mhz", 1980.0},
                                    {"ops", 1}}})},
            {"frontier", json::array({json::array({1000.0, 2.0}), json::array({1005.0, 1.6}), json::array({1020.0, 1.4})})},
            {"energy_by_class", {{"compute", {{"busy_us", 350.0}, {"default_j", 1.0}, {"plan_j", 0.8}}},
                                 {"memory", {{"busy_us", 200.0}, {"default_j", 0.5}, {"plan_j", 0.3}}}}}}}};
}

TEST(HtmlReportTest, DrawsTheTimelineFrontierEnergyAndTable) {
  auto page = ReportHtmlFromOptimizeJson(Plan());
  ASSERT_TRUE(page.ok()) << page.status().message();
  const std::string& s = *page;
  EXPECT_NE(s.find("<svg class=\"timeline\" id=\"timeline-gpu0\""), std::string::npos);
  EXPECT_EQ(Count(s, "<rect class=\"pack\""), 2u);
  // Packs coloured by clock: blue at the lowest clock, red at the default.
  EXPECT_NE(s.find("fill=\"#3182bd\" fill-opacity=\"0.35\""), std::string::npos);
  EXPECT_NE(s.find("fill=\"#d73027\" fill-opacity=\"0.35\""), std::string::npos);
  // Two ops with slack in grey, one on the critical path in dark red, two slack bars.
  const size_t op = s.find("<g class=\"op\""), critical = s.find("<g class=\"critical\""), slack = s.find("<g class=\"slack\"");
  ASSERT_NE(op, std::string::npos);
  ASSERT_NE(critical, std::string::npos);
  ASSERT_NE(slack, std::string::npos);
  EXPECT_EQ(Count(s.substr(op, s.find("</g>", op) - op), "<rect"), 2u);
  EXPECT_EQ(Count(s.substr(critical, s.find("</g>", critical) - critical), "<rect"), 1u);
  EXPECT_EQ(Count(s.substr(slack, s.find("</g>", slack) - slack), "<rect"), 2u);
  // The frontier's three points, the default, static and plan markers; the bars; the table rows.
  EXPECT_EQ(Count(s, "class=\"frontier-point\""), 3u);
  EXPECT_EQ(Count(s, "<circle class=\"mark\""), 3u);
  EXPECT_EQ(Count(s, "<rect class=\"bar\""), 4u);
  EXPECT_NE(s.find("<table id=\"summary\">"), std::string::npos);
  EXPECT_NE(s.find("static 1500 MHz (best one clock)"), std::string::npos);
  EXPECT_NE(s.find("<td>25.00</td>"), std::string::npos);
  EXPECT_EQ(s.find("<script"), std::string::npos);
  // A plan without the sensitivity (a JSON saved before it) draws no row for it.
  EXPECT_EQ(s.find("slowdown with more extra time"), std::string::npos);
}

// The plan's sensitivity to its extra time, with the fragile flag.
TEST(HtmlReportTest, TheSensitivityRowSaysWhenThePlanIsFragile) {
  json plan = Plan();
  plan["plan"]["sensitivity"] = json::array({{{"extra_time_factor", 1.1}, {"slowdown_pct", 4.56}},
                                             {{"extra_time_factor", 1.25}, {"slowdown_pct", 10.56}}});
  for (const bool fragile : {false, true}) {
    plan["plan"]["fragile_time"] = fragile;
    auto page = ReportHtmlFromOptimizeJson(plan);
    ASSERT_TRUE(page.ok()) << page.status().message();
    EXPECT_NE(page->find("x1.1: +4.56 %, x1.25: +10.56 %"), std::string::npos);
    EXPECT_EQ(page->find("(fragile:") != std::string::npos, fragile);
  }
}

TEST(HtmlReportTest, EscapesTheTraceName) {
  auto page = ReportHtmlFromOptimizeJson(Plan("<script>x</script>&.json"));
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->find("<script"), std::string::npos);
  EXPECT_NE(page->find("&lt;script&gt;x&lt;/script&gt;&amp;.json"), std::string::npos);
}

TEST(HtmlReportTest, SeveralRanksAndTheirJob) {
  json out = {{"traces", json::array({Plan("r0.json"), Plan("r1.json")})},
              {"job", {{"baseline_us", 1000.0}, {"planned_us", 1019.0}, {"slowdown_pct", 1.9}, {"target_pct", 2.0},
                       {"met", true}}}};
  auto page = ReportHtmlFromOptimizeJson(out);
  ASSERT_TRUE(page.ok()) << page.status().message();
  EXPECT_NE(page->find("Job of 2 ranks: baseline 1000.0 us, planned 1019.0 us (+1.90 %"), std::string::npos);
  EXPECT_EQ(Count(*page, "<section class=\"plan\">"), 2u);
}

TEST(HtmlReportTest, ASavedJsonItCannotDrawIsRefusedWithWhatIsWrong) {
  json no_report = Plan("a.json");
  no_report.erase("report");
  auto r = ReportHtmlFromOptimizeJson(no_report);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("a.json: no \"report\" object"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("--report"), std::string::npos);

  json short_ops = Plan("b.json");
  short_ops["report"]["gpus"][0]["ops"]["dur_us"] = {1.0};
  r = ReportHtmlFromOptimizeJson(short_ops);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("b.json: report: ops.dur_us is not an array of 3 numbers"), std::string::npos)
      << r.status().message();

  json text_frontier = Plan("c.json");
  text_frontier["report"]["frontier"] = {"x"};
  r = ReportHtmlFromOptimizeJson(text_frontier);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("frontier point"), std::string::npos) << r.status().message();

  EXPECT_FALSE(ReportHtmlFromOptimizeJson(json::array()).ok());
  EXPECT_FALSE(ReportHtmlFromOptimizeJson({{"traces", 3}}).ok());
  EXPECT_FALSE(ReportHtmlFromOptimizeJson({{"traces", json::array()}}).ok());
}

// A saved JSON someone edited: fields of the wrong type are drawn as missing, never thrown on.
TEST(HtmlReportTest, FieldsOfTheWrongTypeAreDrawnAsMissing) {
  json p = Plan();
  p["trace"] = 5;
  p["rank"] = "zero";
  p["confidence"] = json::array();
  p["model"] = json::array({1, 2});
  p["baselines"] = "none";
  p["packings"] = json::array({1});
  p["plan"]["packs"] = "two";
  p["report"]["packs"][0]["device"] = "gpu0";
  p["report"]["packs"][1]["ops"] = json::object();
  p["report"]["gpus"][0]["device"] = nullptr;
  auto page = ReportHtmlFromOptimizeJson(p);
  ASSERT_TRUE(page.ok()) << page.status().message();
  EXPECT_NE(page->find("<h2>trace</h2>"), std::string::npos);
  EXPECT_EQ(Count(*page, "<rect class=\"pack\""), 1u);  // the one whose device is a string is not GPU 0's
}

}  // namespace
}  // namespace emo::report
