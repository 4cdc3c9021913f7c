// The head's two pages for people and scrapers, beside its JSON API (docs/API.md):
//   GET /metrics    the Prometheus text format (launcher/prometheus.h)
//   GET /dashboard  the dashboard (templates/dashboard.html + .js + .css + chart.js from npm,
//                   embedded at build time, overridable from $VERLCTL_TEMPLATE_DIR)
// Both take the token as ?token= as well as the header (a browser, a scraper). The pre-routing
// check in head.cc answers a /metrics without a valid token with 401; a /dashboard without one
// reaches the handler below with res.status already 401, and gets the page with that status, so
// that a person sees a banner that says where the token is rather than a bare JSON error. The
// page holds no data: everything it shows comes from the API, behind the token.
#include <httplib.h>

#include "common/template.h"
#include "launcher/gpu_sampler.h"
#include "launcher/head.h"
#include "launcher/prometheus.h"

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;

// Rows the scrape looks back over for each metric's newest value: validation rows
// (val/score/mean) come every trainer.test_freq steps, not every step.
constexpr int kLatestRowsForScrape = 100;

}  // namespace

void Head::install_page_routes(httplib::Server& http) {
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const int64_t now = now_ms();
    const Json cluster = {{"name", options_.cluster_name},
                          {"backend", options_.backend},
                          {"head", {{"uptime_s", static_cast<double>(now - started_ms_) / 1000.0}}}};
    Json nodes = Json::array();
    for (const auto& n : registry_.nodes()) {
      Json j = node_view(n, now);
      std::lock_guard<std::mutex> lock(samples_mu_);
      auto it = gpu_samples_.find(n.name);
      if (it != gpu_samples_.end() && !it->second.empty()) j["gpu_samples"] = Json::array({samples_json(it->second.back())});
      nodes.push_back(std::move(j));
    }
    Json jobs = Json::array();
    for (const auto& job : jobs_.jobs()) {
      Json s = controller_->summary(job);
      Json latest = Json::object();
      // An ended job's last row is final (its last step validates); looking back is only for
      // jobs still writing, so a scrape costs what runs, not the whole job history.
      const bool live = !is_terminal(job.state);
      for (const auto& row : jobs_.latest_metrics(job.id, live ? kLatestRowsForScrape : 1))
        for (const auto& [key, value] : row.items())
          if (value.is_number()) latest[key] = value;
      s["latest_metrics"] = latest;
      jobs.push_back(std::move(s));
    }
    res.set_content(prometheus_text(cluster, nodes, jobs), kPrometheusContentType);
  });

  http.Get("/dashboard", [](const httplib::Request&, httplib::Response& res) {
    const tmpl::Template page = tmpl::load("dashboard.html");
    const std::string html = tmpl::render(page, Json{{"style", tmpl::load("dashboard.css").text},
                                                     {"chartjs", tmpl::load("vendor/chart.umd.js").text},
                                                     {"script", tmpl::load("dashboard.js").text}});
    // The token is in the address: keep it out of caches and of the Referer of any link.
    res.set_header("Cache-Control", "no-store");
    res.set_header("Referrer-Policy", "no-referrer");
    res.set_content(html, "text/html; charset=utf-8");
    // res.status is 401 when head.cc's check found no valid token: the page then says so.
  });
}

}  // namespace verl::launcher
