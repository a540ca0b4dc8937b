#include "server/server.h"

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <thread>

#include "generate/engine_options.h"
#include "server/answer.h"
#include "server/connection.h"
#include "server/metrics.h"
#include "server/openai.h"
#include "server/request.h"

namespace gerbil::server {
namespace {

using Clock = std::chrono::steady_clock;

// Compares in time that depends only on the lengths, so a wrong key reveals nothing of the right one.
bool same_secret(std::string_view given, std::string_view expected) {
  unsigned char diff = given.size() != expected.size();
  for (size_t i = 0; i < expected.size(); ++i)
    diff |= static_cast<unsigned char>(expected[i] ^ (i < given.size() ? given[i] : 0));
  return diff == 0;
}

// The events of one sequence, handed from the scheduler's thread to the HTTP thread answering it.
class EventQueue {
 public:
  bool push(const SequenceEvent& event) {
    {
      std::lock_guard lock(mutex_);
      events_.push_back(event);
    }
    ready_.notify_one();
    return !abandoned_;
  }
  // The next event, or nothing once DEADLINE passes.
  std::optional<SequenceEvent> next(Clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    if (!ready_.wait_until(lock, deadline, [&] { return !events_.empty(); })) return std::nullopt;
    SequenceEvent event = std::move(events_.front());
    events_.pop_front();
    return event;
  }
  // The client is gone: the scheduler's next callback cancels the sequence.
  void abandon() { abandoned_ = true; }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<SequenceEvent> events_;
  std::atomic<bool> abandoned_{false};
};

}  // namespace

// One completion request on its way: the parsed request, its sequence and what came back so far.
struct Job {
  CompletionRequest request;
  ResponseHead head;
  std::shared_ptr<EventQueue> events = std::make_shared<EventQueue>();
  uint64_t sequence = 0;
  size_t prompt_tokens = 0;
  Clock::time_point arrived, deadline;
  bool constrained_call = false;  // tool_choice required / named: the text is the call's JSON
  bool thinking_opened = false;   // the rendered prompt ends inside a <think> block
  std::string text;
  std::vector<int32_t> ids;
  std::vector<StepLogprobs> logprobs;
  std::optional<Generation> result;
  std::string failure;
  bool timed_out = false;
  bool client_gone = false;       // the client hung up before its answer (either cancels the sequence)
  Clock::time_point next_check;   // when next to ask whether the client is still there

  // Takes the next event into the job.
  void take(const SequenceEvent& event) {
    text += event.text;
    ids.insert(ids.end(), event.ids.begin(), event.ids.end());
    logprobs.insert(logprobs.end(), event.logprobs.begin(), event.logprobs.end());
    if (event.done) {
      result = event.result;
      failure = event.error;
    }
  }
};

struct Server::Impl {
  ServerOptions options;
  ModelLoader loader;
  httplib::Server http;
  std::atomic<bool> ready{false}, stopping{false};
  // run() is about to listen, or has; its listener has returned (or never started).
  std::atomic<bool> listen_called{false}, listener_ended{false};
  std::atomic<int> bound_port{0};
  std::atomic<int> in_flight{0};
  std::unique_ptr<ServedModel> served;
  SamplingOptions recommended;  // the served model's generation_config.json sampling
  std::unique_ptr<Scheduler> scheduler;
  std::string load_error;
  Metrics metrics;
  std::atomic<uint64_t> next_request{1};
  std::thread loading;

  Impl(ServerOptions o, ModelLoader l) : options(std::move(o)), loader(std::move(l)) {}

  // --- bookkeeping ---

  void log(const std::string& id, const httplib::Request& req, int status, size_t prompt, size_t generated,
           Clock::time_point start) {
    log(id, req.method + " " + req.path, status, prompt, generated, start);
  }
  void log(const std::string& id, const std::string& what, int status, size_t prompt, size_t generated,
           Clock::time_point start) {
    metrics.request_done(status);
    std::fprintf(stderr, "%s %s %d prompt=%zu generated=%zu %.3fs\n", id.c_str(), what.c_str(), status, prompt,
                 generated, seconds_since(start));
  }

  std::string request_id(const char* prefix) { return fmt::format("{}-{:08x}", prefix, next_request++); }

  static void write_error(httplib::Response& res, const ApiError& error) {
    res.status = error.status;
    if (error.status == 429 || error.status == 503) res.set_header("Retry-After", "1");
    res.set_content(dump(error_json(error)), "application/json");
  }

  void check_ready() const {
    if (stopping) throw ApiError(503, "the server is shutting down");
    if (!ready) throw ApiError(503, "the model is still loading; retry shortly");
  }

  // --- completions ---

  // How the served model writes tool calls (from its chat template's markers) and whether it thinks in a
  // <think> block first (Qwen3).
  ToolCallFormat tool_format() const {
    return served->chat ? detect_tool_call_format(served->chat->source()) : ToolCallFormat::None;
  }
  bool reasoning() const { return served->model->config().model_type == "qwen3"; }
  AnswerSplit answer_split(const Job& job) const { return {tool_format(), reasoning(), job.thinking_opened}; }

  // The prompt's ids; notes in JOB whether the rendered chat prompt opened a <think> block.
  std::vector<int32_t> prompt_ids(Job& job) const {
    const CompletionRequest& request = job.request;
    const Tokenizer& tokenizer = served->tokenizer;
    if (request.endpoint == Endpoint::Completion) {
      if (request.prompt_ids.empty()) return tokenizer.encode(request.prompt, /*add_special_tokens=*/true);
      for (size_t i = 0; i < request.prompt_ids.size(); ++i)
        if (request.prompt_ids[i] >= served->model->config().vocab_size)
          throw ApiError(400, fmt::format("`prompt[{}]` is token id {}, past the vocabulary of {}", i,
                                          request.prompt_ids[i], served->model->config().vocab_size), "prompt");
      return request.prompt_ids;
    }
    if (!served->chat)
      throw ApiError(400, "this model has no chat template: use /v1/completions", "messages");
    nlohmann::ordered_json variables = request.template_kwargs;
    if (!request.tools.is_null() && request.tool_choice.kind != ToolChoice::Kind::None)
      variables["tools"] = request.tools;
    std::string text;
    try {
      text = served->chat->render(template_messages(request.messages, tool_format()), /*add_generation_prompt=*/true,
                                  variables);
    } catch (const Error& e) {
      throw ApiError(400, fmt::format("the chat template cannot render these messages: {}", e.what()), "messages");
    }
    job.thinking_opened = prompt_opens_thinking(text);
    return tokenizer.encode(text);
  }

  SequenceRequest sequence_request(Job& job) const {
    const CompletionRequest& r = job.request;
    SequenceRequest sequence;
    sequence.prompt = prompt_ids(job);
    job.prompt_tokens = sequence.prompt.size();
    uint32_t context = scheduler->context();
    const char* prompt_field = r.endpoint == Endpoint::Chat ? "messages" : "prompt";
    if (sequence.prompt.size() >= context)
      throw ApiError(400, fmt::format("the prompt has {} tokens but the context holds {} (prompt and answer)",
                                      sequence.prompt.size(), context), prompt_field);
    uint32_t room = context - uint32_t(sequence.prompt.size());
    GenerateOptions& o = sequence.options;
    o.max_new_tokens = std::min(r.max_tokens.value_or(room), room);
    o.stop_strings = r.stop;
    // What the request leaves out is what the model recommends (generation_config.json), as vLLM serves it.
    SamplingParams& s = o.sampling;
    s.temperature = r.temperature.value_or(recommended.temperature);
    s.top_p = r.top_p.value_or(recommended.top_p);
    s.top_k = r.top_k.value_or(recommended.top_k);
    s.min_p = r.min_p.value_or(recommended.min_p);
    s.presence_penalty = r.presence_penalty.value_or(recommended.presence_penalty);
    s.frequency_penalty = r.frequency_penalty.value_or(recommended.frequency_penalty);
    s.repetition_penalty = r.repetition_penalty.value_or(recommended.repetition_penalty);
    // The sampler takes seed 0 to mean "fresh"; a request's seed 0 is a seed like any other.
    if (r.seed) s.seed = *r.seed ? *r.seed : 0x9e3779b97f4a7c15ull;
    // Mistral's [TOOL_CALLS] and Llama 3's <|python_tag|> are special tokens the output parser must see.
    ToolCallFormat format = tool_format();
    if (!r.tools.is_null() && r.tool_choice.kind == ToolChoice::Kind::Auto && format == ToolCallFormat::None)
      throw ApiError(400, "this model's chat template writes tool calls in no format gerbil parses (Qwen's "
                          "<tool_call>, Llama 3's JSON, Mistral's [TOOL_CALLS]): use tool_choice \"required\" or "
                          "a named function, whose call is constrained, or \"none\"", "tool_choice");
    if (!r.tools.is_null() && (format == ToolCallFormat::Mistral || format == ToolCallFormat::Llama3Json))
      sequence.skip_special_tokens = false;
    sequence.logprobs = r.logprobs;
    sequence.top_logprobs = r.top_logprobs;
    for (auto [id, bias] : r.logit_bias)
      if (id >= served->model->config().vocab_size)
        throw ApiError(400, fmt::format("`logit_bias` names token {}, past the vocabulary of {}", id,
                                        served->model->config().vocab_size), "logit_bias");
    sequence.logit_bias = r.logit_bias;
    if (auto schema = answer_schema(r)) {
      std::vector<int32_t> eos(served->model->config().eos_token_ids.begin(), served->model->config().eos_token_ids.end());
      sequence.constraint = json_constraint(*schema, answer_schema_field(r), served->tokenizer, eos);
      job.constrained_call = r.tool_choice.kind == ToolChoice::Kind::Named ||
                             r.tool_choice.kind == ToolChoice::Kind::Required;
      // A response format after a prompt that opened the reasoning holds once the model closes it (as vLLM's
      // reasoning parsers have it); a call's JSON is the whole text, so it starts at once.
      if (!job.constrained_call && reasoning() && job.thinking_opened)
        sequence.constraint = after_reasoning(std::move(sequence.constraint), served->tokenizer, std::move(eos));
    }
    return sequence;
  }

  // Parses, prepares and submits a completion request. Throws ApiError.
  std::shared_ptr<Job> start_job(const httplib::Request& req, Endpoint endpoint, Clock::time_point arrived) {
    check_ready();
    auto job = std::make_shared<Job>();
    job->request = parse_completion_request(req.body, endpoint);
    if (!job->request.model.empty() && job->request.model != options.model_name)
      throw ApiError(404, fmt::format("the model \"{}\" does not exist; this server serves \"{}\"",
                                      job->request.model, options.model_name), "model", "not_found_error");
    job->head = {request_id(endpoint == Endpoint::Chat ? "chatcmpl" : "cmpl"),
                 std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch()).count(),
                 options.model_name, endpoint};
    job->arrived = arrived;
    job->deadline = arrived + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(options.timeout_seconds));
    SequenceRequest sequence;
    try {
      sequence = sequence_request(*job);
    } catch (const ApiError&) {
      throw;
    } catch (const Error& e) {
      throw ApiError(400, e.what());
    }
    auto events = job->events;
    try {
      job->sequence = scheduler->submit(std::move(sequence),
                                        [events](const SequenceEvent& event) { return events->push(event); });
    } catch (const QueueFull& e) {
      throw ApiError(429, fmt::format("the server is busy: {}", e.what()));
    } catch (const Error& e) {
      if (stopping) throw ApiError(503, "the server is shutting down");
      throw ApiError(400, e.what());
    }
    return job;
  }

  // Waits for the job's next event. At the deadline, or once the client of CONNECTION (asked every
  // kClientCheck; -1: not asked) has hung up, cancels the sequence, whose last event still comes.
  std::optional<SequenceEvent> next_event(Job& job, int connection = -1) {
    constexpr auto kClientCheck = std::chrono::milliseconds(200);
    while (!job.timed_out && !job.client_gone) {
      Clock::time_point now = Clock::now();
      job.timed_out = now >= job.deadline;
      if (connection >= 0 && now >= job.next_check) {
        job.client_gone = client_closed(connection);
        job.next_check = now + kClientCheck;
      }
      if (job.timed_out || job.client_gone) {
        scheduler->cancel(job.sequence);
        break;
      }
      if (auto event = job.events->next(connection >= 0 ? std::min(job.deadline, job.next_check) : job.deadline))
        return event;
    }
    return job.events->next(Clock::now() + std::chrono::seconds(60));
  }

  void finish_metrics(const Job& job) {
    if (!job.result) return;
    const GenerationStats& stats = job.result->stats;
    double per_token = stats.generated_tokens > 1 ? stats.decode_seconds / double(stats.generated_tokens - 1) : 0;
    metrics.generation_done(stats.prompt_tokens, stats.generated_tokens, stats.time_to_first_token, per_token);
  }

  void check_outcome(const Job& job) const {
    if (job.client_gone) throw ApiError(499, "the client closed the connection");
    if (!job.result) throw ApiError(500, "the sequence ended without a result");
    if (!job.failure.empty()) throw ApiError(500, fmt::format("generation failed: {}", job.failure));
    if (job.timed_out)
      throw ApiError(503, fmt::format("the request ran past the server's timeout of {} s", options.timeout_seconds));
    // Cancelled by a second signal: its answer is cut short (or, queued, never began).
    if (job.result->finish == FinishReason::Cancelled && stopping)
      throw ApiError(503, "the server is shutting down: the request was cancelled");
  }

  ordered_json logprobs_json(const Job& job, const std::vector<StepLogprobs>& steps, size_t text_offset) const {
    if (!job.request.logprobs) return nullptr;
    return job.request.endpoint == Endpoint::Chat ? chat_logprobs(served->tokenizer, steps)
                                                  : completion_logprobs(served->tokenizer, steps, text_offset);
  }

  // A client that hangs up is seen by asking its connection while the answer is computed (a stream sees it
  // when a write fails): its sequence is cancelled and logged 499, as a stream's is.
  void answer_whole(Job& job, const httplib::Request& req, httplib::Response& res) {
    int connection = connection_socket(req);
    while (!job.result) {
      auto event = next_event(job, connection);
      if (!event) throw ApiError(500, "the scheduler stopped answering");
      job.take(*event);
    }
    finish_metrics(job);
    check_outcome(job);
    Answer answer = parse_answer(job.text, job.request, answer_split(job));
    res.set_content(dump(completion_response(job.head, answer, *job.result, logprobs_json(job, job.logprobs, 0))),
                    "application/json");
  }

  // Server-sent events: a role chunk, then a chunk per event. A chat answer's text goes through AnswerStream,
  // which sends reasoning, content and tool calls apart as soon as each is known (a call opens once its name is
  // written, then its arguments stream), a required call's too; a named call streams its arguments as they come.
  class Stream {
   public:
    Stream(Impl& server, std::shared_ptr<Job> job) : server_(server), job_(std::move(job)) {
      const CompletionRequest& r = job_->request;
      if (r.endpoint == Endpoint::Chat && r.tool_choice.kind != ToolChoice::Kind::Named)
        answer_.emplace(r, server_.answer_split(*job_));
    }

    // Writes what is due; false when the client is gone.
    bool step(httplib::DataSink& sink) {
      const ResponseHead& head = job_->head;
      bool usage = job_->request.include_usage;
      if (!started_) {
        started_ = true;
        if (head.endpoint != Endpoint::Chat) return true;
        ordered_json delta = {{"role", "assistant"}, {"content", ""}};
        if (job_->request.tool_choice.kind == ToolChoice::Kind::Named) {
          call_id_ = tool_call_id();
          delta = {{"role", "assistant"},
                   {"content", nullptr},
                   {"tool_calls", ordered_json::array({{{"index", 0},
                                                        {"id", call_id_},
                                                        {"type", "function"},
                                                        {"function", {{"name", job_->request.tool_choice.name},
                                                                      {"arguments", ""}}}}})}};
        }
        return write(sink, stream_chunk(head, delta, nullptr, nullptr, usage));
      }
      auto event = server_.next_event(*job_);
      if (!event) return false;
      size_t offset = job_->text.size();
      job_->take(*event);
      // Ids whose text is held back (part of a character, of a stop string, of a marker or a call being written)
      // send their log-probabilities with an empty delta.
      if (!event->text.empty() || !event->logprobs.empty()) {
        ordered_json delta = event->text.empty() ? ordered_json::object() : text_delta(event->text);
        ordered_json logprobs = event->logprobs.empty() ? nullptr : server_.logprobs_json(*job_, event->logprobs, offset);
        if ((!delta.empty() || !logprobs.is_null()) && !write(sink, stream_chunk(head, delta, logprobs, nullptr, usage)))
          return false;
      }
      if (!event->done) return true;
      server_.finish_metrics(*job_);
      try {
        server_.check_outcome(*job_);
      } catch (const ApiError& error) {
        status_ = error.status;
        return write_raw(sink, sse(error_json(error)) + "data: [DONE]\n\n") && (sink.done(), true);
      }
      bool calls = !call_id_.empty();
      if (answer_) {
        ordered_json delta = answer_->finish();
        calls = answer_->has_tool_calls();
        if (!delta.empty() && !write(sink, stream_chunk(head, delta, nullptr, nullptr, usage))) return false;
      }
      std::string tail = sse(stream_chunk(head, head.endpoint == Endpoint::Chat ? ordered_json::object()
                                                                                 : ordered_json{{"content", ""}},
                                          nullptr, finish_reason(job_->result->finish, calls), usage));
      if (usage) tail += sse(usage_chunk(head, job_->result->stats));
      tail += "data: [DONE]\n\n";
      if (!write_raw(sink, tail)) return false;
      sink.done();
      return true;
    }

    int status() const { return status_; }

   private:
    // The delta that streams TEXT: the answer's content (or reasoning, or a tool call it parsed), or the named
    // tool call's arguments.
    ordered_json text_delta(const std::string& text) {
      if (answer_) return answer_->feed(text);
      if (!call_id_.empty())
        return {{"tool_calls", ordered_json::array({{{"index", 0}, {"function", {{"arguments", text}}}}})}};
      return {{"content", text}};
    }
    bool write(httplib::DataSink& sink, const ordered_json& chunk) { return write_raw(sink, sse(chunk)); }
    bool write_raw(httplib::DataSink& sink, const std::string& text) { return sink.write(text.data(), text.size()); }

    Impl& server_;
    std::shared_ptr<Job> job_;
    bool started_ = false;
    std::string call_id_;
    std::optional<AnswerStream> answer_;
    int status_ = 200;
  };

  void answer_stream(const std::shared_ptr<Job>& job, const httplib::Request& req, httplib::Response& res) {
    auto stream = std::make_shared<Stream>(*this, job);
    ++in_flight;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [stream](size_t, httplib::DataSink& sink) { return stream->step(sink); },
        [this, stream, job, what = req.method + " " + req.path](bool success) {
          if (!success) {  // the client went away, or the server is closing: stop the sequence
            job->events->abandon();
            scheduler->cancel(job->sequence);
          }
          const Generation* result = job->result ? &*job->result : nullptr;
          log(job->head.id, what, success ? stream->status() : 499, job->prompt_tokens,
              result ? result->stats.generated_tokens : job->ids.size(), job->arrived);
          --in_flight;
        });
  }

  void completion(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
    auto arrived = Clock::now();
    std::shared_ptr<Job> job;
    ++in_flight;
    try {
      job = start_job(req, endpoint, arrived);
      if (job->request.stream) {
        answer_stream(job, req, res);
        --in_flight;
        return;
      }
      answer_whole(*job, req, res);
      res.status = 200;
    } catch (const ApiError& error) {
      write_error(res, error);
    } catch (const std::exception& e) {
      write_error(res, ApiError(500, fmt::format("internal error: {}", e.what())));
    }
    log(job ? job->head.id : request_id("req"), req, res.status, job ? job->prompt_tokens : 0,
        job && job->result ? job->result->stats.generated_tokens : 0, arrived);
    --in_flight;
  }

  // --- the other endpoints ---

  // Runs HANDLER for a simple (not streamed) endpoint: errors become OpenAI error bodies; one log line.
  void simple(const httplib::Request& req, httplib::Response& res, bool needs_model,
              const std::function<void()>& handler) {
    auto arrived = Clock::now();
    try {
      if (needs_model) check_ready();
      handler();
      if (res.status == -1) res.status = 200;  // httplib sets its default only after the handler returns
    } catch (const ApiError& error) {
      write_error(res, error);
    } catch (const std::exception& e) {
      write_error(res, ApiError(400, e.what()));
    }
    // Probes (load balancers, Prometheus) are neither logged nor counted: they would drown the requests.
    if (req.path != "/metrics" && req.path != "/health") log(request_id("req"), req, res.status, 0, 0, arrived);
  }

  void health(httplib::Response& res) const {
    if (ready && !stopping) return res.set_content(R"({"status":"ok"})", "application/json");
    res.status = 503;
    res.set_header("Retry-After", "1");
    res.set_content(stopping ? R"({"status":"stopping"})" : R"({"status":"loading"})", "application/json");
  }

  ApiError body_too_large() const {
    return ApiError(413, fmt::format("the request body is larger than {} bytes", options.max_body_bytes));
  }

  // Whether the request carries the API key (or none is needed); else answers 401.
  bool authorized(const httplib::Request& req, httplib::Response& res) {
    if (options.api_key.empty() || req.path == "/health") return true;
    std::string header = req.get_header_value("Authorization");
    constexpr std::string_view kBearer = "Bearer ";
    std::string_view given = std::string_view(header).starts_with(kBearer)
                                 ? std::string_view(header).substr(kBearer.size()) : std::string_view();
    if (same_secret(given, options.api_key)) return true;
    write_error(res, ApiError(401, "a valid API key is needed (Authorization: Bearer KEY)"));
    log(request_id("req"), req, 401, 0, 0, Clock::now());
    return false;
  }

  // Registers HANDLER for requests with a body (POST to PATH, or with PATH ".*" every method that has one): the
  // body is read first, at most max_body_bytes of it whatever its framing (httplib bounds a Content-Length body,
  // not a chunked one), and only then is the key checked, so that no answer leaves a body unread on a connection
  // kept alive (it would be read as the next request).
  void with_body(const std::string& path, const std::function<void(const httplib::Request&, httplib::Response&)>& handler) {
    auto read_then_handle = [this, handler](const httplib::Request& req, httplib::Response& res,
                                            const httplib::ContentReader& read) {
      httplib::Request whole = req;
      bool too_large = false;
      bool complete = read([&](const char* data, size_t size) {
        too_large = whole.body.size() + size > options.max_body_bytes;
        if (!too_large) whole.body.append(data, size);
        return !too_large;
      });
      if (!complete) {
        res.set_header("Connection", "close");  // what is left of the body is still on the connection
        ApiError error = too_large || res.status == 413 ? body_too_large()
                                                        : ApiError(400, "the request body's framing is broken");
        write_error(res, error);
        log(request_id("req"), req, error.status, 0, 0, Clock::now());
        return;
      }
      if (authorized(whole, res)) handler(whole, res);
    };
    http.Post(path, read_then_handle);
    if (path != ".*") return;
    http.Put(path, read_then_handle);
    http.Patch(path, read_then_handle);
    http.Delete(path, read_then_handle);
  }

  void routes() {
    http.set_payload_max_length(options.max_body_bytes);
    // The methods whose bodies httplib reads are checked once the body is read (with_body), the others here,
    // whatever headers they carry.
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      using Response = httplib::Server::HandlerResponse;
      for (const char* method : {"POST", "PUT", "PATCH", "DELETE"})
        if (req.method == method) return Response::Unhandled;
      if (req.method != "GET" && req.method != "HEAD" && req.method != "OPTIONS") {
        res.set_header("Connection", "close");
        write_error(res, ApiError(405, fmt::format("the method {} is not served", req.method)));
        log(request_id("req"), req, 405, 0, 0, Clock::now());
        return Response::Handled;
      }
      return authorized(req, res) ? Response::Unhandled : Response::Handled;
    });
    // Statuses httplib answers itself (404 no route, 413 body too large, 400 bad framing) get an error body.
    http.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty() || res.is_chunked_content_provider_) return httplib::Server::HandlerResponse::Unhandled;
      std::string message = res.status == 404   ? fmt::format("no endpoint {} {}", req.method, req.path)
                            : res.status == 413 ? std::string(body_too_large().what())
                                                : fmt::format("HTTP {}", res.status);
      write_error(res, ApiError(res.status, message));
      log(request_id("req"), req, res.status, 0, 0, Clock::now());
      return httplib::Server::HandlerResponse::Handled;
    }));
    with_body("/v1/chat/completions", [this](const auto& req, auto& res) { completion(req, res, Endpoint::Chat); });
    with_body("/v1/completions", [this](const auto& req, auto& res) { completion(req, res, Endpoint::Completion); });
    http.Get("/health", [this](const auto& req, auto& res) { simple(req, res, false, [&] { health(res); }); });
    http.Get("/metrics", [this](const auto& req, auto& res) {
      simple(req, res, false, [&] {
        SchedulerStats stats = ready ? scheduler->stats() : SchedulerStats{};
        res.set_content(metrics.text(stats, ready), "text/plain; version=0.0.4");
      });
    });
    http.Get("/v1/models", [this](const auto& req, auto& res) {
      simple(req, res, false, [&] {
        ordered_json model = {{"id", options.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "gerbil"}};
        if (ready) model["max_model_len"] = scheduler->context();
        res.set_content(dump({{"object", "list"}, {"data", ordered_json::array({model})}}), "application/json");
      });
    });
    with_body("/tokenize", [this](const auto& req, auto& res) {
      simple(req, res, true, [&] {
        TokenizeRequest request = parse_tokenize_request(req.body);
        res.set_content(dump({{"tokens", served->tokenizer.encode(request.content, request.add_special)}}),
                        "application/json");
      });
    });
    with_body("/detokenize", [this](const auto& req, auto& res) {
      simple(req, res, true, [&] {
        DetokenizeRequest request = parse_detokenize_request(req.body);
        std::string text;
        try {
          text = served->tokenizer.decode(request.tokens);
        } catch (const Error& e) {
          throw ApiError(400, e.what(), "tokens");
        }
        res.set_content(dump({{"content", text}}), "application/json");
      });
    });
    // Last: bodies sent anywhere else are read (within the bound) before the 404.
    with_body(".*", [](const auto&, auto& res) { res.status = 404; });
  }

  void load() {
    try {
      served = std::make_unique<ServedModel>(loader());
      recommended = recommended_sampling(served->model->config().generation);
      scheduler = std::make_unique<Scheduler>(*served->model, &served->tokenizer, options.scheduler);
      ready = true;
      std::fprintf(stderr, "ready: %s, %u sequences of up to %u tokens\n", options.model_name.c_str(),
                   scheduler->parallel(), scheduler->context());
    } catch (const std::exception& e) {
      load_error = e.what();
      std::fprintf(stderr, "error: loading the model failed: %s\n", e.what());
      stopping = true;
      stop_listening();
    }
  }

  // httplib's stop() does nothing before its listener runs: a listener about to start is waited for (run()
  // does not start one once `stopping` is set).
  void stop_listening() {
    while (listen_called && !listener_ended && !http.is_running())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    http.stop();
  }
};

Server::Server(ServerOptions options, ModelLoader loader)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(loader))) {}

Server::~Server() {
  if (impl_->loading.joinable()) impl_->loading.join();
}

int Server::run() {
  Impl& s = *impl_;
  // Every waiting or streaming request holds an HTTP thread: enough for the running, the queued and a few
  // more (health checks, metrics, requests turned away).
  size_t threads = s.options.scheduler.parallel + s.options.scheduler.max_queue + 16;
  s.http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.routes();
  int port = s.options.port == 0 ? s.http.bind_to_any_port(s.options.host)
                                 : s.http.bind_to_port(s.options.host, s.options.port) ? s.options.port : -1;
  if (port <= 0)
    fail("cannot listen on {}:{} (in use, or not an address of this machine)", s.options.host, s.options.port);
  s.bound_port = port;
  std::fprintf(stderr, "listening on http://%s:%d (loading %s)\n", s.options.host.c_str(), s.bound_port.load(),
               s.options.model_name.c_str());
  s.loading = std::thread([&s] { s.load(); });
  s.listen_called = true;
  if (!s.stopping) s.http.listen_after_bind();
  s.listener_ended = true;
  if (s.loading.joinable()) s.loading.join();
  if (s.scheduler) s.scheduler->shutdown(/*finish=*/false);
  return s.load_error.empty() ? 0 : 1;
}

void Server::stop(bool finish) {
  Impl& s = *impl_;
  s.stopping = true;
  if (s.ready) s.scheduler->shutdown(finish);
  // Let the streams still being written end (each has had its last event), then close the listener.
  auto give_up = Clock::now() + std::chrono::seconds(10);
  while (s.in_flight > 0 && Clock::now() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  s.stop_listening();
}

int Server::port() const { return impl_->bound_port; }

}  // namespace gerbil::server
