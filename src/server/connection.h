// The connection a request came on, for a handler that must notice its client hang up while it waits: cpp-httplib
// 0.11 tells a streaming handler (its writes fail) but hands a plain handler neither the socket nor a way to ask.
#pragma once

#include <httplib.h>

namespace gerbil::server {

// The socket of the connection serving REQUEST: the open descriptor whose two ends are the request's (the
// connection stays open while its handler runs). -1 where none is found or descriptors cannot be listed
// (/proc/self/fd).
int connection_socket(const httplib::Request& request);

// Whether the client closed (or reset) connection SOCKET. Reads nothing off it.
bool client_closed(int socket);

}  // namespace gerbil::server
