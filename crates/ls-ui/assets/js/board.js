export async function mount(view) { view.textContent = 'board'; }
