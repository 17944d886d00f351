// Package bufpool lends large byte buffers for the length of one request
// (a request body read in, an upstream body written out), so that a big
// request does not leave its buffers to the collector, which shares the
// cores with the requests. It is internal: the sizes and the rules of
// when a buffer may go back are its callers'.
package bufpool
