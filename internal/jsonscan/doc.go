// Package jsonscan is a validating JSON scanner that decodes the fields a
// caller asks for straight from the text, in one pass, without
// reflection: upstream chunks (model/internal/upstream) and create
// requests (responses) are read with it. Whatever a caller skips is
// checked while it is skipped, so a text the scanner accepts is one
// encoding/json accepts.
package jsonscan
