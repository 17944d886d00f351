// Package records holds the encodings both stores share: the events of a
// response as one text value (one line of JSON per event, in sequence
// order) and items as the JSON the responses package writes. Keeping them
// in one place means a response reads back the same from either store.
package records
