// Command scw-emulator serves the in-memory Scaleway API emulator of package
// scalewaytest on a local address, for the playground and for trying the
// controller against a Scaleway that costs nothing and can be seeded,
// inspected and reset by restarting it.
//
//	scw-emulator --listen 127.0.0.1:8081 --private-network nodes=172.16.0.0/22 --private-network lb=10.1.0.0/24
//
// It prints one line per seeded object, then
// "scw-emulator listening on http://127.0.0.1:8081" once it serves, and
// stops on SIGINT or SIGTERM.
//
// It imports only the emulator, test/emulator.
package main
