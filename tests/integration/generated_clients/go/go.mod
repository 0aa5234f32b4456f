module kafkathrottle.io/clientcheck

go 1.23

require github.com/kafkathrottle/throttleclient v0.0.0

// The client openapi-generator made from openapi/openapi.json, beside this folder's copy in
// the build directory (tests/integration/test_generated_clients.py).
replace github.com/kafkathrottle/throttleclient => ./client
