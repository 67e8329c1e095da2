// Package inputschema holds an action's session inputSchema (SPEC A3, S5).
//
// An action with a session block may declare the JSON Schema its session
// inputs must satisfy. Compile turns the schema text into a Schema once per
// action version; the Schema is then shared by everything that needs it:
//
//   - session intake validates each start input with Validate; a failure is
//     kept as an intake record whose reason is the error text (S5);
//   - action validation asks HasPath whether an expression's path into
//     session.input can exist, Required which properties a start mapping must
//     produce, and Closed whether the top level forbids other properties (A3).
//
// Schemas come from clients, so compiling never reaches outside the document:
// a $ref may only point inside it (to $defs, anchors or any other location),
// and any attempt to load another resource, whether a file, an http URL or
// anything else, fails with fault.InvalidSchema. Formats are asserted, so a
// "uuid" property rejects a string that is not a UUID. Numbers stay exact:
// schemas are decoded with json.Number and instances are expected the same
// way, so a 19-digit integer compares against maximum without rounding.
//
// A session input is always a JSON object, so a schema whose top level
// declares any other type is rejected at compile time.
package inputschema
