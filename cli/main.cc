// The `shardsim` command: plan, simulate and validate the sharding of transformer training.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <streambuf>

#include "cli/app.h"

namespace {

// Exit status when the output could not be written: reported like bad input, one
// `shardsim: error:` line (docs/cli.md), as the place it was sent to is the user's choice.
constexpr int kOutputFailed = 2;

// Passes std::cout's output on to its own buffer (C stdio, so the order with anything else
// written to stdout stays as it was) and keeps the errno of the first write that fails: stdio
// keeps only a flag, and by the time the command returns errno has long been overwritten.
class ErrnoKeepingBuffer : public std::streambuf {
 public:
  explicit ErrnoKeepingBuffer(std::streambuf* target) : target_(target) {}
  int error() const { return error_; }
  std::streambuf* target() const { return target_; }

 protected:
  std::streamsize xsputn(const char* text, std::streamsize n) override {
    errno = 0;
    const std::streamsize done = target_->sputn(text, n);
    if (done != n) Keep();
    return done;
  }
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    errno = 0;
    const int_type put = target_->sputc(traits_type::to_char_type(c));
    if (traits_type::eq_int_type(put, traits_type::eof())) Keep();
    return put;
  }
  int sync() override {
    errno = 0;
    const int result = target_->pubsync();
    if (result != 0) Keep();
    return result;
  }

 private:
  void Keep() {
    if (error_ == 0) error_ = errno != 0 ? errno : EIO;
  }

  std::streambuf* target_;
  int error_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  ErrnoKeepingBuffer buffer(std::cout.rdbuf());
  std::cout.rdbuf(&buffer);
  const int status = shardsim::cli::Run(argc, argv);
  // A full disk, a closed stdout or a vanished pipe: the command must not look as if it had
  // answered. Checked once here, after everything the command printed.
  std::cout.flush();
  std::cout.rdbuf(buffer.target());
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  int error = buffer.error();
  if (error == 0 && !flushed) error = errno != 0 ? errno : EIO;
  if (error == 0 && (!std::cout.good() || std::ferror(stdout) != 0)) error = EIO;
  if (error == 0) return status;
  std::fprintf(stderr, "shardsim: error: standard output: cannot be written: %s\n", std::strerror(error));
  return status == 0 ? kOutputFailed : status;
}
