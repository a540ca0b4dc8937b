#include "server/connection.h"

#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <charconv>
#include <filesystem>
#include <string>

namespace gerbil::server {
namespace {

// The numeric host and port of an address, as httplib writes a request's remote and local ends.
bool host_and_port(const sockaddr_storage& address, socklen_t length, std::string& host, int& port) {
  char host_text[NI_MAXHOST], port_text[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, host_text, sizeof host_text, port_text,
                  sizeof port_text, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return false;
  host = host_text;
  return std::from_chars(port_text, port_text + std::char_traits<char>::length(port_text), port).ec == std::errc();
}

bool has_ends(int socket, const httplib::Request& request) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  std::string host;
  int port = -1;
  if (getpeername(socket, reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
      !host_and_port(address, length, host, port) || port != request.remote_port || host != request.remote_addr)
    return false;
  length = sizeof address;
  return getsockname(socket, reinterpret_cast<sockaddr*>(&address), &length) == 0 &&
         host_and_port(address, length, host, port) && port == request.local_port && host == request.local_addr;
}

}  // namespace

int connection_socket(const httplib::Request& request) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", error)) {
    int socket = -1;
    std::string name = entry.path().filename().string();
    if (std::from_chars(name.data(), name.data() + name.size(), socket).ec != std::errc()) continue;
    if (has_ends(socket, request)) return socket;
  }
  return -1;
}

bool client_closed(int socket) {
  char byte;
  ssize_t got = recv(socket, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (got > 0) return false;  // a next request already waits: the client is there
  if (got == 0) return true;  // an orderly close
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

}  // namespace gerbil::server
