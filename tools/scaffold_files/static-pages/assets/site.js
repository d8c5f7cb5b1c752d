// Fills <nav id="site-nav"> with a link to every page listed in /pages.json.
(async () => {
  const nav = document.getElementById('site-nav')
  if (!nav) return
  const pages = await (await fetch('/pages.json')).json()
  for (const page of pages) {
    const link = document.createElement('a')
    link.href = page.path
    link.textContent = page.title
    if (page.path === location.pathname || (page.path === '/' && location.pathname === '/index.html')) {
      link.setAttribute('aria-current', 'page')
    }
    nav.appendChild(link)
  }
})()
