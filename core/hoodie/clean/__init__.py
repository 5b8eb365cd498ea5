"""Clean: reclaim storage held by old file versions, without breaking any reader."""
