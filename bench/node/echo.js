// The Node floor of the cold-path bench: answers every event with the event itself, loading
// nothing (the counterpart of the Rust bench-floor binary).
'use strict';

exports.handler = async (event) => event;
