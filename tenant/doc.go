// Package tenant carries the principal a request runs for. The server puts
// the authenticated tenant into the request's context; the engine stores
// it with everything the request creates and returns ErrNotFound to any
// other tenant; tool providers key private caches by it.
//
// The empty tenant is the anonymous one: a server without authentication
// runs every request as it, and rows stored before tenants existed belong
// to it. How the other tenants are named, so that an API key's tenant and a
// JWT's never share a name, is in name.go.
package tenant
