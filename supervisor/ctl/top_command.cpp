#include "supervisor/ctl/top_command.hpp"

#include "supervisor/ctl/control_client.hpp"
#include "supervisor/ctl/instance_owner.hpp"
#include "supervisor/ctl/report_format.hpp"
#include "supervisor/ctl/top_view.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace comfy::ctl {

namespace {

volatile sig_atomic_t g_stop = 0;

void on_stop_signal(int) { g_stop = 1; }

// Keys one at a time and unechoed, on the alternate screen with the cursor hidden, until
// destroyed: then the terminal as it was. Signals only set a flag the loop reads, so this
// destructor is what restores the terminal on Ctrl-C and SIGTERM too.
class RawTerminal {
public:
    RawTerminal() {
        if (::tcgetattr(STDIN_FILENO, &saved_) != 0) return;
        termios raw = saved_;
        raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);  // ISIG stays: Ctrl-C is SIGINT
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        if (::tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) != 0) return;
        active_ = true;
        write_out("\x1b[?1049h\x1b[?25l");
    }
    ~RawTerminal() {
        if (!active_) return;
        write_out("\x1b[?25h\x1b[?1049l");
        ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_);
    }
    RawTerminal(const RawTerminal&) = delete;
    RawTerminal& operator=(const RawTerminal&) = delete;
    bool active() const noexcept { return active_; }

    static void write_out(const std::string& text) {
        std::size_t done = 0;
        while (done < text.size()) {
            const ssize_t n = ::write(STDOUT_FILENO, text.data() + done, text.size() - done);
            if (n <= 0) return;
            done += static_cast<std::size_t>(n);
        }
    }

private:
    termios saved_{};
    bool active_ = false;
};

// Asked at every frame, so a resized terminal gets a frame of its new width within a second.
std::size_t terminal_width() {
    winsize size{};
    if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
    return columns_or(std::getenv("COLUMNS"), 100);
}

std::string clock_text() {
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    ::localtime_r(&now, &local);
    char text[16];
    std::strftime(text, sizeof text, "%H:%M:%S", &local);
    return text;
}

// The reserve is the supervisor's config, not in the segment: asked once, briefly; the
// screen says "?" when the supervisor does not answer (stopped, or another user's).
std::optional<std::uint64_t> ask_reserve(const std::string& instance) {
    try {
        ControlClient client(instance);
        ControlRequest info;
        info.op = Op::info;
        client.send(info);
        const auto answer = client.answer(std::chrono::seconds(1));
        if (answer.value("ok", false) && answer.contains("reserve_bytes") && answer["reserve_bytes"].is_number_unsigned()) {
            return answer["reserve_bytes"].get<std::uint64_t>();
        }
    } catch (const ControlUnreachable&) {
    }
    return std::nullopt;
}

// Each frame from the top-left corner, every line cleared to its end, then the rest.
std::string screen_of(const std::string& frame) {
    std::string out = "\x1b[H";
    std::size_t start = 0;
    for (std::size_t end; (end = frame.find('\n', start)) != std::string::npos; start = end + 1) {
        out += frame.substr(start, end - start) + "\x1b[K\r\n";
    }
    return out + "\x1b[J";
}

}  // namespace

int run_top(const std::string& instance) {
    if (!::isatty(STDIN_FILENO) || !::isatty(STDOUT_FILENO)) {
        std::fprintf(stderr, "comfyctl: top needs a terminal; use comfyctl census (or --json) elsewhere\n");
        return 1;
    }
    const auto segment = attach_instance(instance);  // throws SegmentError, one line
    const auto reserve = ask_reserve(instance);
    struct sigaction stop {};
    stop.sa_handler = on_stop_signal;
    for (const int signal : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(signal, &stop, nullptr);
    std::string gone;
    {
        RawTerminal terminal;
        if (!terminal.active()) {
            std::fprintf(stderr, "comfyctl: top cannot set the terminal's mode; use comfyctl census\n");
            return 1;
        }
        auto next = std::chrono::steady_clock::now();
        while (g_stop == 0) {
            if (std::chrono::steady_clock::now() >= next) {
                if (ipc::inspect_segment(segment.name()).state != ipc::SegmentState::live) {
                    gone = "the supervisor of instance '" + instance + "' is gone; top ends";
                    break;
                }
                const auto report = read_report(instance, segment);
                if (segment.outdated()) {
                    gone = "segment " + segment.name() + " was truncated or replaced by another process of this " +
                           "user; run comfyctl top again";
                    break;
                }
                const TopContext context{reserve, clock_text(), terminal_width(), wall_clock_ms()};
                RawTerminal::write_out(screen_of(top_frame(report, context)));
                next += std::chrono::seconds(1);
            }
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next - std::chrono::steady_clock::now());
            pollfd keys{STDIN_FILENO, POLLIN, 0};
            if (::poll(&keys, 1, static_cast<int>(std::max<long long>(left.count(), 0))) <= 0) continue;
            char key = 0;
            const ssize_t n = ::read(STDIN_FILENO, &key, 1);
            if (n == 0 || key == 'q' || key == 'Q') break;  // 0 after poll: the terminal hung up
        }
    }
    if (!gone.empty()) {
        std::fprintf(stderr, "comfyctl: %s\n", gone.c_str());
        return 1;
    }
    return 0;
}

}  // namespace comfy::ctl
