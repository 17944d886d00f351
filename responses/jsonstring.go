package responses

// AppendJSONString appends s to dst as a JSON string, the way this
// package's encoders write strings (no HTML escaping; invalid UTF-8 as
// U+FFFD; U+2028 and U+2029 escaped). It is for the packages that write
// JSON by hand around these types, such as the model backends' upstream
// request bodies, so that there is one string encoder.
func AppendJSONString(dst []byte, s string) []byte { return appendString(dst, s) }
