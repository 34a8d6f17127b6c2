export function renderGrade(env) { return String(env.info.final_score); }
